// The data dir's lock, <data>/loom.lock (flock): one supervisor per data dir.
// The watcher holds it for its whole life; `loom up` takes it before it
// touches endpoints.json and hands the same open file to the watcher it
// starts (inherited as fd 3), so there is no moment when a second `up` could
// take it; `loom down` and `loom keys init --force` hold it while they work.
// The file says who holds it: "<pid> <what>\n". A dir_lock is owned by one
// thread; the lock goes with the last descriptor of the open file.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <string>
#include <sys/types.h>

namespace loom::cli {

// Who holds (or last held) the lock, as its file says; pid 0 when unknown.
struct lock_holder {
  pid_t pid = 0;
  std::string what;  // "up", "watch", "down", "keys"
  std::string describe() const;  // "loom watch (pid 123)"
};
lock_holder read_lock_holder(const layout::paths& p);

class dir_lock {
 public:
  // Takes the lock, retrying for up to `wait` (zero: one try), and records
  // this process as `what`. conflict when another process holds it (the
  // message names it); other errors when the file cannot be opened.
  static result<dir_lock> take(const layout::paths& p, const std::string& what,
                               std::chrono::milliseconds wait = std::chrono::milliseconds(0));
  // The watcher's lock: fd 3 when it is the open lock file `loom up` passed
  // (already held), else take(p, what).
  static result<dir_lock> inherit_or_take(const layout::paths& p, const std::string& what);

  dir_lock(dir_lock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  dir_lock& operator=(dir_lock&& o) noexcept;
  dir_lock(const dir_lock&) = delete;
  dir_lock& operator=(const dir_lock&) = delete;
  ~dir_lock() { release(); }

  int fd() const { return fd_; }
  void release();  // closes this descriptor (the lock goes once no process has the file open)

 private:
  explicit dir_lock(int fd) : fd_(fd) {}
  static result<dir_lock> claim(int fd, const std::string& what);
  int fd_ = -1;
};

}  // namespace loom::cli
