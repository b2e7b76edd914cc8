#include "libs/files/buffered_reader.hpp"

#include "libs/files/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::files {

result<buffered_reader> buffered_reader::open(std::string path, std::size_t buffer_bytes) {
  buffered_reader f;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd_ < 0) return errno_error("open", path);
  struct stat st{};
  if (::fstat(f.fd_, &st) != 0) return errno_error("stat", path);
  f.size_ = static_cast<std::uint64_t>(st.st_size);
  f.path_ = std::move(path);
  f.buf_.resize(std::max<std::size_t>(buffer_bytes, 4096));
  return f;
}

buffered_reader::buffered_reader(buffered_reader&& o) noexcept { *this = std::move(o); }

buffered_reader& buffered_reader::operator=(buffered_reader&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
    path_ = std::move(o.path_);
    buf_ = std::move(o.buf_);
    pos_ = o.pos_;
    end_ = o.end_;
    size_ = o.size_;
  }
  return *this;
}

buffered_reader::~buffered_reader() {
  if (fd_ >= 0) ::close(fd_);
}

result<bool> buffered_reader::read(void* out, std::size_t n) {
  char* o = static_cast<char*>(out);
  std::size_t got = 0;
  while (got < n) {
    if (pos_ == end_) {
      ssize_t r;
      do r = ::read(fd_, buf_.data(), buf_.size());
      while (r < 0 && errno == EINTR);
      if (r < 0) return errno_error("read", path_);
      if (r == 0) {
        if (got == 0) return false;
        return make_error(errc::corruption, path_ + ": ends part-way through a record");
      }
      pos_ = 0;
      end_ = static_cast<std::size_t>(r);
    }
    const std::size_t k = std::min(n - got, end_ - pos_);
    std::memcpy(o + got, buf_.data() + pos_, k);
    pos_ += k;
    got += k;
  }
  return true;
}

status buffered_reader::seek(std::uint64_t offset) {
  if (::lseek(fd_, static_cast<off_t>(offset), SEEK_SET) < 0) return errno_error("seek", path_);
  pos_ = end_ = 0;
  return {};
}

status buffered_reader::pread(void* out, std::size_t n, std::uint64_t offset) const {
  char* o = static_cast<char*>(out);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, o + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return errno_error("pread", path_);
    if (r == 0)
      return make_error(errc::corruption, path_ + ": ends before byte " + std::to_string(offset + n));
    got += static_cast<std::size_t>(r);
  }
  return {};
}

}  // namespace loom::files
