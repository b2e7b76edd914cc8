#include "libs/cdc/plain_file.hpp"

#include "libs/atrest/object.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <cstring>
#include <iterator>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

status pread_all(int fd, char* buf, std::size_t n, std::uint64_t off, const std::string& path) {
  while (n > 0) {
    const ssize_t got = ::pread(fd, buf, n, static_cast<off_t>(off));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return files::errno_error("read", path);
    if (got == 0) return make_error(errc::conflict, path + " is shorter than its manifest says (changed since)");
    buf += got;
    n -= static_cast<std::size_t>(got);
    off += static_cast<std::uint64_t>(got);
  }
  return {};
}

}  // namespace

result<plain_file> plain_file::open(const std::string& path) {
  plain_file f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (f.fd_ < 0) return files::errno_error("open", path);
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) return files::errno_error("stat", path);
  f.size_ = static_cast<std::uint64_t>(st.st_size);
  char head[8];
  if (f.size_ < atrest::sealed_header_size || ::pread(f.fd_, head, sizeof head, 0) != sizeof head ||
      !atrest::looks_sealed(std::string_view(head, sizeof head)))
    return f;
  std::string sealed(f.size_, '\0');
  if (auto st2 = pread_all(f.fd_, sealed.data(), sealed.size(), 0, path); !st2) return st2.err();
  auto keys = atrest::process_keys();
  if (!keys) return make_error(errc::not_found, path + " is sealed at rest and this process has no keys to read it");
  if (auto st2 = atrest::unseal_into(sealed, *keys, path, f.plain_); !st2) return st2.err();
  f.sealed_ = true;
  f.size_ = f.plain_.size();
  return f;
}

plain_file::plain_file(plain_file&& o) noexcept
    : fd_(o.fd_), sealed_(o.sealed_), size_(o.size_), path_(std::move(o.path_)), plain_(std::move(o.plain_)) {
  o.fd_ = -1;
}

plain_file& plain_file::operator=(plain_file&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    sealed_ = o.sealed_;
    size_ = o.size_;
    path_ = std::move(o.path_);
    plain_ = std::move(o.plain_);
    o.fd_ = -1;
  }
  return *this;
}

plain_file::~plain_file() {
  if (fd_ >= 0) ::close(fd_);
}

status plain_file::read(std::uint64_t offset, char* buf, std::size_t n) const {
  if (!sealed_) return pread_all(fd_, buf, n, offset, path_);
  if (offset > size_ || n > size_ - offset)
    return make_error(errc::conflict, path_ + " is shorter than its manifest says (changed since)");
  std::memcpy(buf, plain_.data() + offset, n);
  return {};
}

result<const plain_file*> plain_file_cache::get(const std::string& path) {
  if (auto it = files_.find(path); it != files_.end()) return &it->second;
  auto f = plain_file::open(path);
  if (!f.ok()) return f.err();
  if (f->sealed())
    for (auto it = files_.begin(); it != files_.end();) it = it->second.sealed() ? files_.erase(it) : std::next(it);
  return &files_.emplace(path, std::move(*f)).first->second;
}

}  // namespace loom::cdc
