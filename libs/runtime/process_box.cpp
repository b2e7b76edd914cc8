#include "libs/runtime/process_box.hpp"

#include "libs/runtime/cgroup_files.hpp"

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::runtime {
namespace {

bool exists(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0;
}

// "" on success, else why (with errno's words).
std::string put(const std::string& path, const std::string& text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return path + ": " + std::strerror(errno);
  const ssize_t n = ::write(fd, text.data(), text.size());
  const int err = errno;
  ::close(fd);
  if (n != static_cast<ssize_t>(text.size())) return path + ": " + std::strerror(err);
  return "";
}

std::string cores(double c) {
  char s[32];
  std::snprintf(s, sizeof s, "%g core%s", c, c == 1 ? "" : "s");
  return s;
}

std::atomic<std::uint64_t> counter{0};

}  // namespace

const char* to_string(box_mode m) {
  switch (m) {
    case box_mode::cgroup_v2: return "cgroup v2";
    case box_mode::cgroup_v1: return "cgroup v1";
    case box_mode::rlimit: return "setrlimit";
  }
  return "?";
}

process_box process_box::make(const std::string& name, const box_limits& l, const box_paths& p) {
  process_box b;
  b.limits_ = l;
  std::string leaf = "loom-" + std::to_string(::getpid()) + "-" + std::to_string(++counter) + "-";
  for (char c : name) leaf += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  const std::string self = cgroup::read(p.proc + "/self/cgroup").value_or("");
  std::string why_not;
  auto limits_text = [&](const std::string& cpu_note) {
    return std::string(l.memory_bytes ? "memory <= " + cgroup::bytes_text(l.memory_bytes) : "no memory limit") + ", " +
           (l.cpus > 0 && cpu_note.empty() ? "cpu <= " + cores(l.cpus) : "no CPU limit" + cpu_note);
  };
  auto open_procs = [&](const std::string& dir) {
    const int fd = ::open((dir + "/cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC);
    if (fd >= 0) b.procs_fds_.push_back(fd);
    return fd >= 0;
  };
  auto undo = [&] {
    for (int fd : b.procs_fds_) ::close(fd);
    b.procs_fds_.clear();
    for (auto it = b.dirs_.rbegin(); it != b.dirs_.rend(); ++it) ::rmdir(it->c_str());
    b.dirs_.clear();
  };
  // cgroup v2: the unified hierarchy at the root, our own group's child.
  const std::string v2 = cgroup::own(self, "");
  if (!v2.empty() && exists(p.cgroup + "/cgroup.controllers")) {
    const std::string parent = p.cgroup + (v2 == "/" ? "" : v2), dir = parent + "/" + leaf;
    if (::mkdir(dir.c_str(), 0755) == 0) {
      b.dirs_.push_back(dir);
      if (!exists(dir + "/memory.max")) (void)put(parent + "/cgroup.subtree_control", "+memory +cpu");
      if (!exists(dir + "/memory.max")) {
        why_not = "cgroup v2: the memory controller is not delegated to " + parent;
      } else {
        std::string err = l.memory_bytes ? put(dir + "/memory.max", std::to_string(l.memory_bytes)) : "";
        if (err.empty() && l.memory_bytes && exists(dir + "/memory.swap.max")) (void)put(dir + "/memory.swap.max", "0");
        std::string cpu_note;
        if (l.cpus > 0) {
          const auto quota = static_cast<long long>(l.cpus * 100000);
          if (auto e = put(dir + "/cpu.max", std::to_string(quota) + " 100000"); !e.empty()) cpu_note = " (" + e + ")";
        }
        if (err.empty() && open_procs(dir)) {
          b.mode_ = box_mode::cgroup_v2;
          b.oom_file_ = dir + "/memory.events";
          b.desc_ = "cgroup v2: " + limits_text(cpu_note);
          return b;
        }
        why_not = "cgroup v2: " + (err.empty() ? dir + "/cgroup.procs cannot be opened" : err);
      }
      undo();
    } else {
      why_not = "cgroup v2: " + dir + ": " + std::strerror(errno);
    }
  }
  // cgroup v1: the memory controller's hierarchy (and the cpu one's, where writable).
  const std::string v1 = cgroup::own(self, "memory");
  if (!v1.empty() && exists(p.cgroup + "/memory/memory.limit_in_bytes")) {
    const std::string dir = p.cgroup + "/memory" + (v1 == "/" ? "" : v1) + "/" + leaf;
    if (::mkdir(dir.c_str(), 0755) == 0) {
      b.dirs_.push_back(dir);
      std::string err = l.memory_bytes ? put(dir + "/memory.limit_in_bytes", std::to_string(l.memory_bytes)) : "";
      if (err.empty() && open_procs(dir)) {
        std::string cpu_note;
        const std::string v1cpu = cgroup::own(self, "cpu");
        if (l.cpus > 0) {
          const std::string cdir = p.cgroup + "/cpu" + (v1cpu == "/" || v1cpu.empty() ? "" : v1cpu) + "/" + leaf;
          if (::mkdir(cdir.c_str(), 0755) != 0) {
            cpu_note = " (" + cdir + ": " + std::strerror(errno) + ")";
          } else {
            b.dirs_.push_back(cdir);
            std::string e = put(cdir + "/cpu.cfs_period_us", "100000");
            if (e.empty()) e = put(cdir + "/cpu.cfs_quota_us", std::to_string(static_cast<long long>(l.cpus * 100000)));
            if (e.empty() && !open_procs(cdir)) e = cdir + "/cgroup.procs cannot be opened";
            if (!e.empty()) cpu_note = " (" + e + ")";
          }
        }
        b.mode_ = box_mode::cgroup_v1;
        b.oom_file_ = dir + "/memory.oom_control";
        b.desc_ = "cgroup v1: " + limits_text(cpu_note);
        return b;
      }
      why_not += (why_not.empty() ? "" : "; ") + std::string("cgroup v1: ") +
                 (err.empty() ? dir + "/cgroup.procs cannot be opened" : err);
      undo();
    } else {
      why_not += (why_not.empty() ? "" : "; ") + std::string("cgroup v1: ") + dir + ": " + std::strerror(errno);
    }
  }
  if (why_not.empty()) why_not = "no cgroup hierarchy under " + p.cgroup;
  b.mode_ = box_mode::rlimit;
  b.desc_ = "setrlimit: " + std::string(l.memory_bytes ? "data <= " + cgroup::bytes_text(l.memory_bytes) : "no memory limit") +
            ", no CPU limit (" + why_not + ")";
  return b;
}

process_box::process_box(process_box&& o) noexcept
    : mode_(o.mode_), limits_(o.limits_), dirs_(std::move(o.dirs_)), procs_fds_(std::move(o.procs_fds_)),
      oom_file_(std::move(o.oom_file_)), desc_(std::move(o.desc_)) {
  o.dirs_.clear();
  o.procs_fds_.clear();
}

process_box::~process_box() {
  for (int fd : procs_fds_) ::close(fd);
  for (auto it = dirs_.rbegin(); it != dirs_.rend(); ++it) ::rmdir(it->c_str());
}

bool process_box::enter() const noexcept {
  if (mode_ == box_mode::rlimit) {
    if (!limits_.memory_bytes) return true;
    struct rlimit r{limits_.memory_bytes, limits_.memory_bytes};
    return ::setrlimit(RLIMIT_DATA, &r) == 0;
  }
  char digits[24];
  int n = 0;
  for (long v = ::getpid(); v > 0; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  char text[24];
  for (int i = 0; i < n; ++i) text[i] = digits[n - 1 - i];
  bool ok = true;
  for (int fd : procs_fds_) ok = ::write(fd, text, static_cast<std::size_t>(n)) == n && ok;
  return ok;
}

std::string process_box::memory_limit_text() const { return cgroup::bytes_text(limits_.memory_bytes); }

std::uint64_t process_box::oom_kills() const {
  if (oom_file_.empty()) return 0;
  return cgroup::field(cgroup::read(oom_file_).value_or(""), "oom_kill");
}

}  // namespace loom::runtime
