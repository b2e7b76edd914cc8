// process_box: the limits one child process runs under (issue 30, item 2) —
// a cgroup of its own with a memory limit and a CPU quota where this process
// may make one, else setrlimit in the child:
//
//   cgroup v2   <own cgroup>/loom-<name>: memory.max, cpu.max
//               (needs the memory controller in the parent's subtree_control;
//               it is enabled when the kernel allows it)
//   cgroup v1   <memory mount>/<own>/loom-<name>: memory.limit_in_bytes;
//               <cpu mount>/<own>/loom-<name>: cpu.cfs_quota_us, where writable
//   rlimit      RLIMIT_DATA (heap and private mappings) in the child; no CPU
//               limit — describe() says so and why no cgroup could be made
//
// make() never fails: it falls back and says why. The child joins between
// fork and exec (enter(): async-signal-safe). After the child ended,
// oom_kills() says whether the kernel killed it for memory. The destructor
// removes the cgroups (the child must have been reaped). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

struct box_limits {
  std::uint64_t memory_bytes = 0;  // 0: none
  double cpus = 0;                 // cores' worth of CPU time; 0: none
};

struct box_paths {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";
};

enum class box_mode { cgroup_v2, cgroup_v1, rlimit };
const char* to_string(box_mode m);  // "cgroup v2", "cgroup v1", "setrlimit"

class process_box {
 public:
  static process_box make(const std::string& name, const box_limits& l, const box_paths& p = {});
  process_box(process_box&& o) noexcept;
  process_box& operator=(process_box&&) = delete;
  process_box(const process_box&) = delete;
  ~process_box();

  box_mode mode() const { return mode_; }
  // "cgroup v1: memory <= 1.5 GiB, cpu <= 2 cores" / "setrlimit: data <= 1.5 GiB, no CPU limit (no cgroup: ...)".
  const std::string& describe() const { return desc_; }
  // In the child, between fork and exec: join the cgroups or set the rlimit.
  // Only async-signal-safe calls. Returns false when joining failed.
  bool enter() const noexcept;
  // Memory kills by the kernel inside this box so far (cgroup modes; 0 for rlimit).
  std::uint64_t oom_kills() const;
  std::string memory_limit_text() const;  // "1.4 GiB", as describe() says it

 private:
  process_box() = default;
  box_mode mode_ = box_mode::rlimit;
  box_limits limits_;
  std::vector<std::string> dirs_;  // made by us, removed at the end
  std::vector<int> procs_fds_;     // cgroup.procs of each, opened for the child's write
  std::string oom_file_;           // memory.events (v2) or memory.oom_control (v1)
  std::string desc_;
};

}  // namespace loom::runtime
