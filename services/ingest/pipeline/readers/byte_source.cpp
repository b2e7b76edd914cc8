#include "services/ingest/pipeline/readers/byte_source.hpp"

#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace loom::ingest {
namespace {

// files::errno_error's message; the code is not_found or unavailable, never
// permission_denied, which the reader takes for "outside the import roots".
error source_error(const std::string& what, const std::string& path, int e) {
  error err = files::errno_error(what, path, e);
  err.code = e == ENOENT ? errc::not_found : errc::unavailable;
  return err;
}

class file_source final : public byte_source {
 public:
  file_source(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~file_source() override { ::close(fd_); }
  file_source(const file_source&) = delete;
  file_source& operator=(const file_source&) = delete;

  result<std::size_t> read(char* buf, std::size_t cap) override {
    for (;;) {
      ssize_t n = ::read(fd_, buf, cap);
      if (n >= 0) return static_cast<std::size_t>(n);
      if (errno == EINTR) continue;
      failure_ = reject_reason::io_error;
      return source_error("read", path_, errno);
    }
  }

 private:
  int fd_;
  std::string path_;
};

class memory_source final : public byte_source {
 public:
  explicit memory_source(std::string_view d) : data_(d) {}
  result<std::size_t> read(char* buf, std::size_t cap) override {
    std::size_t n = std::min(cap, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, n);
    pos_ += n;
    return n;
  }

 private:
  std::string_view data_;
  std::size_t pos_ = 0;
};

}  // namespace

result<std::unique_ptr<byte_source>> open_file_source(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return source_error("open", path, errno);
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<byte_source>(new file_source(fd, path));
}

result<std::unique_ptr<byte_source>> open_file_source(const std::string& path, const std::vector<std::string>& roots) {
  if (roots.empty()) return open_file_source(path);
  auto fd = files::open_confined(roots, path, O_RDONLY);
  if (!fd) return fd.err();
  ::posix_fadvise(*fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  return std::unique_ptr<byte_source>(new file_source(*fd, path));
}

std::unique_ptr<byte_source> make_memory_source(std::string_view data) {
  return std::make_unique<memory_source>(data);
}

result<std::string_view> peek_source::peek(std::size_t n) {
  while (head_.size() < n) {
    std::size_t old = head_.size();
    head_.resize(n);
    auto r = inner_.read(head_.data() + old, n - old);
    if (!r.ok()) {
      head_.resize(old);
      failure_ = inner_.failure_reason();
      return r.err();
    }
    head_.resize(old + *r);
    if (*r == 0) break;
  }
  return std::string_view(head_);
}

result<std::size_t> peek_source::read(char* buf, std::size_t cap) {
  if (head_pos_ < head_.size()) {
    std::size_t n = std::min(cap, head_.size() - head_pos_);
    std::memcpy(buf, head_.data() + head_pos_, n);
    head_pos_ += n;
    if (head_pos_ == head_.size()) {
      head_.clear();
      head_.shrink_to_fit();
      head_pos_ = 0;
    }
    bytes_ += n;
    return n;
  }
  auto r = inner_.read(buf, cap);
  if (!r.ok()) {
    failure_ = inner_.failure_reason();
    return r;
  }
  bytes_ += *r;
  return r;
}

}  // namespace loom::ingest
