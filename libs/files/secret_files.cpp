#include "libs/files/secret_files.hpp"

#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::files::secret {
namespace {

std::string dir_of(const std::string& path) {
  std::filesystem::path p(path);
  return p.has_parent_path() ? p.parent_path().string() : ".";
}

}  // namespace

status create_exclusive(const std::string& path, std::string_view data, mode_t mode) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return files::errno_error("create", tmp);
  ::fchmod(fd, files::masked_mode(mode));  // the umask may narrow the mode, never widen it
  status w = files::write_all(fd, data, tmp);
  if (w.ok() && files::fsync_fd(fd) != 0) w = files::errno_error("fsync", tmp);
  ::close(fd);
  if (!w.ok()) {
    ::unlink(tmp.c_str());
    return w;
  }
  // link() fails with EEXIST instead of replacing, unlike rename().
  if (::link(tmp.c_str(), path.c_str()) != 0) {
    // EEXIST is already_exists: losing this race means another process made
    // the key (anchor_signer takes it).
    const int err = errno;
    auto e = files::errno_error("publish", path, err);
    if (err == EEXIST) e.code = errc::already_exists;
    ::unlink(tmp.c_str());
    return e;
  }
  ::unlink(tmp.c_str());
  return files::fsync_dir(dir_of(path));
}

result<std::string> read_private(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto e = files::errno_error("stat", path);
    ::close(fd);
    return e;
  }
  if ((st.st_mode & 077) != 0) {
    ::close(fd);
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    return make_error(errc::permission_denied, "key file " + path + " has mode " + mode +
                                                   ": group and others must have no access (chmod 600 " + path + ")");
  }
  ::close(fd);
  return files::read_file(path);
}

status shred(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return files::errno_error("open", path);
  struct stat st {};
  status s = ::fstat(fd, &st) == 0 ? ok_status() : status(files::errno_error("stat", path));
  if (s.ok()) s = files::write_all(fd, std::string(static_cast<std::size_t>(st.st_size), '\0'), path);
  if (s.ok() && files::fsync_fd(fd) != 0) s = files::errno_error("fsync", path);
  ::close(fd);
  if (!s.ok()) return s;
  if (::unlink(path.c_str()) != 0) return files::errno_error("unlink", path);
  return files::fsync_dir(dir_of(path));
}

status make_private_dir(const std::string& dir) { return files::make_dirs(dir, 0700); }

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace loom::files::secret
