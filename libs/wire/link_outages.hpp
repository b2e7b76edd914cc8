// Scheduled outages of an emulated link: fixed windows ("down from 10 s to
// 12 s") and/or a seeded generator ("offline 20% of the time in bursts of
// 5..15 s"). Times are durations since the link's start (link_time); nothing
// here reads a clock. Value type, one owner (a link_shaper); not thread-safe.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/link_random.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <vector>

namespace loom::wire {

// Time on an emulated link: nanoseconds since the link started.
using link_time = std::chrono::nanoseconds;

// The link is down during [start, end).
struct outage_window {
  link_time start{0};
  link_time end{0};
  bool operator==(const outage_window&) const = default;
};

// "Offline `fraction` of the time, in bursts of min_burst..max_burst."
// Periods alternate up, down, up, down, ... starting up. Down periods are
// uniform in [min_burst, max_burst] (mean D); up periods are uniform in
// [U/2, 3U/2] with U = D (1 - f) / f, so the long-run down fraction is f.
struct outage_generator {
  double fraction = 0.0;  // in (0, 1)
  link_time min_burst{0};
  link_time max_burst{0};  // >= min_burst > 0
  bool operator==(const outage_generator&) const = default;
};

// invalid_argument naming the bad field, else ok.
status validate(const outage_generator& g);
status validate(const outage_window& w);

// The generator's windows that start before `horizon` (for inspection and
// tests; the schedule below produces the same ones lazily).
// REQUIRES: validate(g) ok.
std::vector<outage_window> generate_outages(const outage_generator& g, std::uint64_t seed, link_time horizon);

class outage_schedule {
 public:
  // Fixed windows (any order, may overlap) plus an optional generator seeded
  // by `seed`. Windows with end <= start are ignored.
  outage_schedule(std::vector<outage_window> fixed, std::optional<outage_generator> gen, std::uint64_t seed);

  // The earliest-starting window that overlaps [from, to] (a window
  // [s, e) overlaps when s <= to and e > from), or nullopt.
  // REQUIRES: `from` never decreases between calls (windows that ended
  // before it are forgotten).
  std::optional<outage_window> first_overlap(link_time from, link_time to);
  bool down_at(link_time t) { return first_overlap(t, t).has_value(); }

 private:
  void generate_until(link_time t);  // extend generated_ to cover [.., t]

  std::vector<outage_window> fixed_;  // sorted by start
  std::optional<outage_generator> gen_;
  link_random rng_;
  std::deque<outage_window> generated_;
  link_time generated_to_{0};  // periods are generated up to here
};

}  // namespace loom::wire
