#include "libs/files/files.hpp"

#include "libs/files/fault.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <atomic>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::files {
error errno_error(const std::string& what, const std::string& path, int e) {
  const errc c = e == ENOENT                  ? errc::not_found
                 : e == EACCES || e == EPERM  ? errc::permission_denied
                 : e == ENOSPC || e == EDQUOT || e == EFBIG ? errc::resource_exhausted
                                              : errc::internal;
  return make_error(c, what + " " + path + ": " + std::strerror(e));
}

status write_all(int fd, std::string_view data, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("write", path);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

status pwrite_all(int fd, std::string_view data, std::uint64_t offset, const std::string& path) {
  while (!data.empty()) {
    const ssize_t n = ::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("write", path);
    data.remove_prefix(static_cast<std::size_t>(n));
    offset += static_cast<std::uint64_t>(n);
  }
  return {};
}

mode_t masked_mode(mode_t mode) {
  // Read, not set: umask(2) would change it for every thread for a moment.
  // The "Umask:" line is in /proc/self/status since Linux 4.7.
  auto text = read_file("/proc/self/status");
  if (!text) return mode;
  auto at = text->find("\nUmask:");
  if (at == std::string::npos) return mode;
  const mode_t mask = static_cast<mode_t>(std::strtoul(text->c_str() + at + 7, nullptr, 8));
  return mode & ~mask & 07777;
}

result<std::string> read_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_error("open", path);
  std::string out;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      auto e = errno_error("read", path);
      ::close(fd);
      return e;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

status fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno_error("open dir", dir);
  int rc = files::fsync_fd(fd);
  ::close(fd);
  if (rc != 0) return errno_error("fsync dir", dir);
  return {};
}

status write_atomic(const std::string& path, std::string_view data, mode_t mode) {
  return write_atomic_parts(path, std::span<const std::string_view>(&data, 1), mode);
}

status write_atomic_parts(const std::string& path, std::span<const std::string_view> parts, mode_t mode) {
  std::filesystem::path p(path);
  std::string dir = p.has_parent_path() ? p.parent_path().string() : ".";
  // Unique per process and call: two threads writing the same path must not share a temp file.
  static std::atomic<std::uint64_t> calls{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(calls++);
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return errno_error("create", tmp);
  ::fchmod(fd, masked_mode(mode));  // exactly that: the umask may narrow the mode, never widen it
  for (const auto data : parts)
    if (auto w = write_all(fd, data, tmp); !w) {
      ::close(fd);
      ::unlink(tmp.c_str());
      return w;
    }
  if (files::fsync_fd(fd) != 0) {
    auto e = errno_error("fsync", tmp);
    ::close(fd);
    ::unlink(tmp.c_str());
    return e;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    auto e = errno_error("rename to", path);
    ::unlink(tmp.c_str());
    return e;
  }
  return fsync_dir(dir);
}

status make_dirs(const std::string& dir, mode_t mode) {
  std::error_code ec;
  std::filesystem::path p(dir);
  std::filesystem::path cur;
  for (const auto& part : p) {
    cur /= part;
    if (cur.empty() || std::filesystem::exists(cur, ec)) continue;
    if (::mkdir(cur.c_str(), mode) != 0 && errno != EEXIST) return errno_error("mkdir", cur.string());
  }
  return {};
}

std::string resolve_data_dir(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) return explicit_dir;
  if (const char* h = std::getenv("LOOM_HOME"); h && *h) return h;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.local/share/edgeloom";
}

}  // namespace loom::files
