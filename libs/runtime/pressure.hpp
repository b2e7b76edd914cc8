// loom::runtime pressure: how hard this machine (or this process's cgroup)
// is pressed for memory and CPU, and the load-shedding level that follows
// from it (issue 30, item 3).
//
//   memory  the used fraction of what this process may use: the nearest
//           cgroup limit above it — v2 memory.max ((memory.current -
//           inactive_file) / memory.max: reclaimable page cache is not
//           pressure), else v1 memory.limit_in_bytes (usage_in_bytes -
//           total_inactive_file) — else the machine ((MemTotal -
//           MemAvailable) / MemTotal, /proc/meminfo)
//   cpu     the share of time runnable tasks waited for a CPU over the last
//           10 s, in percent: /proc/pressure/cpu "some avg10" (PSI); unknown
//           (-1) where the kernel has no PSI
//
// A test (or an operator rehearsing) injects a reading with a file of
// `memory=0.95` / `cpu=80` lines (LOOM_PRESSURE_FILE): each value it names
// replaces the measured one; it is read anew every time.
//
// pressure_gauge turns readings into a level:
//   ok         below every threshold
//   high       at or past one: the trainer lowers its micro-batch
//   sustained  high without a break for `pause_after` while a stage runs:
//              the scheduler pauses the lowest-priority work there
// Pure apart from read_pressure (files); time is passed in.
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace loom::runtime {

struct pressure_reading {
  double memory = -1;        // used fraction 0..1 (-1: unknown)
  std::uint64_t used_bytes = 0, limit_bytes = 0;
  double cpu = -1;           // PSI cpu some avg10, percent (-1: unknown)
  std::string memory_source; // "cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes", "/proc/meminfo", "injected (<file>)"
  std::string cpu_source;    // "/proc/pressure/cpu", "injected (<file>)", "" unknown
};

struct pressure_paths {
  std::string proc = "/proc";
  std::string cgroup = "/sys/fs/cgroup";  // the v2 hierarchy's mount point; v1's memory controller under memory/
  std::string inject;                     // a file of memory=/cpu= lines ("" none)
};

// A reading now. An unreadable /proc/meminfo, or an injection file that
// exists but is malformed (naming the file, line and value), is an error; a
// missing injection file injects nothing.
result<pressure_reading> read_pressure(const pressure_paths& p);

// The thresholds and the patience of load shedding.
struct shed_settings {
  double memory = 0.90;  // high at or past this used fraction; 0 = never by memory
  double cpu = 0;        // high at or past this PSI percent; 0 = never by CPU (the default:
                         // a busy machine is what training is for; set it where other work must keep its share)
  std::chrono::milliseconds pause_after{30'000};  // high this long while running: sustained
  std::string inject;    // LOOM_PRESSURE_FILE
};

// From the environment (LOOM_SHED_MEMORY 0..1, LOOM_SHED_CPU 0..100,
// LOOM_SHED_PAUSE_AFTER_S 0.1..86400, LOOM_PRESSURE_FILE): invalid_argument
// naming the variable and its value for anything else.
result<shed_settings> shed_settings_from_env(const std::function<const char*(const char*)>& getenv);

enum class pressure_level { ok, high, sustained };
const char* to_string(pressure_level l);

class pressure_gauge {
 public:
  using clock = std::chrono::steady_clock;
  explicit pressure_gauge(shed_settings s) : s_(std::move(s)) {}

  // One reading at `now` (non-decreasing); `running`: a stage runs here.
  // The sustained clock runs only while a stage runs and the reading stays high.
  pressure_level update(const pressure_reading& r, clock::time_point now, bool running);
  pressure_level level() const { return level_; }
  // Why it is not ok, with the numbers: "memory 95% of 8.0 GiB (cgroup v2
  // memory.max) >= 90%", "cpu pressure 97% >= 90% (/proc/pressure/cpu)";
  // sustained adds "for 31 s". "" when ok.
  const std::string& why() const { return why_; }
  const pressure_reading& last() const { return last_; }
  const shed_settings& settings() const { return s_; }

 private:
  shed_settings s_;
  pressure_level level_ = pressure_level::ok;
  std::optional<clock::time_point> high_since_;
  pressure_reading last_;
  std::string why_;
};

}  // namespace loom::runtime
