#include "libs/dedup/io.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::dedup::detail {

error io_error(const char* what, const std::string& path) {
  auto e = files::errno_error(what, path);
  e.message = "dedup scratch: " + e.message;
  return e;
}

result<std::shared_ptr<scratch>> scratch::create(const std::string& parent) {
  std::string base = parent;
  if (base.empty()) {
    const char* t = std::getenv("TMPDIR");
    base = t && *t ? t : "/tmp";
  }
  std::string tmpl = base + "/loom-dedup-XXXXXX";
  if (!::mkdtemp(tmpl.data())) return io_error("mkdtemp", tmpl);
  return std::shared_ptr<scratch>(new scratch(tmpl));
}

scratch::~scratch() {
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::string scratch::new_path(const char* tag) {
  return dir_ + "/" + tag + "-" + std::to_string(next_.fetch_add(1)) + ".run";
}

// ---- out_file

result<out_file> out_file::create(std::string path, std::size_t buffer_bytes, scratch* owner) {
  out_file f;
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (f.fd_ < 0) return io_error("create", path);
  f.path_ = std::move(path);
  f.buf_.resize(std::max<std::size_t>(buffer_bytes, 4096));
  f.owner_ = owner;
  return f;
}

out_file::out_file(out_file&& o) noexcept { *this = std::move(o); }

out_file& out_file::operator=(out_file&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    used_ = o.used_;
    owner_ = o.owner_;
  }
  return *this;
}

out_file::~out_file() {
  if (fd_ >= 0) ::close(fd_);
}

status out_file::flush() {
  std::size_t done = 0;
  while (done < used_) {
    const ssize_t w = ::write(fd_, buf_.data() + done, used_ - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return io_error("write", path_);
    done += static_cast<std::size_t>(w);
  }
  if (owner_) owner_->bytes_written += used_;
  used_ = 0;
  return {};
}

status out_file::write(const void* data, std::size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const std::size_t k = std::min(n, buf_.size() - used_);
    std::memcpy(buf_.data() + used_, p, k);
    used_ += k;
    p += k;
    n -= k;
    if (used_ == buf_.size())
      if (auto s = flush(); !s) return s;
  }
  return {};
}

status out_file::close() {
  if (auto s = flush(); !s) return s;
  // No fsync: scratch data is worthless after a crash, the job restarts.
  const int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) return io_error("close", path_);
  std::vector<char>().swap(buf_);
  return {};
}

}  // namespace loom::dedup::detail
