// The data dir lock (dir_lock.hpp).
#include "client/dir_lock.hpp"

#include "libs/files/files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace loom::cli {
namespace {
// The holder's line, padded: every holder writes the same length.
constexpr std::size_t holder_line = 32;
}  // namespace

std::string lock_holder::describe() const {
  std::string who = what.empty() ? "a process" : "loom " + what;
  return pid > 0 ? who + " (pid " + std::to_string(pid) + ")" : who;
}

lock_holder read_lock_holder(const layout::paths& p) {
  lock_holder h;
  auto text = files::read_file(p.lock());
  if (!text) return h;
  char* end = nullptr;
  h.pid = static_cast<pid_t>(std::strtol(text->c_str(), &end, 10));
  std::string rest = end ? std::string(end) : "";
  while (!rest.empty() && (rest.front() == ' ')) rest.erase(rest.begin());
  while (!rest.empty() && (rest.back() == '\n' || rest.back() == ' ')) rest.pop_back();
  h.what = rest;
  return h;
}

dir_lock& dir_lock::operator=(dir_lock&& o) noexcept {
  if (this != &o) {
    release();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void dir_lock::release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

result<dir_lock> dir_lock::claim(int fd, const std::string& what) {
  // One fixed-width write over the previous line, never a truncation first:
  // a reader (read_lock_holder) never sees the file empty.
  std::string line = std::to_string(::getpid()) + " " + what;
  line.resize(std::max<std::size_t>(line.size(), holder_line - 1), ' ');
  line += '\n';
  if (::pwrite(fd, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size()) ||
      ::ftruncate(fd, static_cast<off_t>(line.size())) != 0) {
    auto e = files::errno_error("write", "the data dir lock");
    ::close(fd);
    return e;
  }
  return dir_lock(fd);
}

result<dir_lock> dir_lock::take(const layout::paths& p, const std::string& what, std::chrono::milliseconds wait) {
  int fd = ::open(p.lock().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return files::errno_error("open", p.lock());
  const auto until = std::chrono::steady_clock::now() + wait;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return claim(fd, what);
    if (errno != EWOULDBLOCK && errno != EINTR) {
      auto e = files::errno_error("flock", p.lock());
      ::close(fd);
      return e;
    }
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::close(fd);
  return make_error(errc::conflict, p.root + " is in use by " + read_lock_holder(p).describe() + " (lock " +
                                        p.lock() + ")");
}

result<dir_lock> dir_lock::inherit_or_take(const layout::paths& p, const std::string& what) {
  struct stat passed {}, file {};
  if (::fstat(3, &passed) == 0 && ::stat(p.lock().c_str(), &file) == 0 && passed.st_dev == file.st_dev &&
      passed.st_ino == file.st_ino) {
    ::fcntl(3, F_SETFD, FD_CLOEXEC);  // the services it starts must not hold it
    // The same open file as the lock holder's: this succeeds when `loom up` holds it for us.
    if (::flock(3, LOCK_EX | LOCK_NB) == 0) return claim(3, what);
    ::close(3);
  }
  return take(p, what);
}

}  // namespace loom::cli
