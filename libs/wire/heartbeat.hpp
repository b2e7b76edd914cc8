// Heartbeat bookkeeping, pure logic: no sockets, no clock of its own (time is
// passed in, so tests drive it). The receiver keeps one `liveness` per peer;
// the sender keeps one `heartbeat_schedule`. Trainers beat every 1 s to the
// scheduler (ARCHITECTURE.md §3). Value types; not thread-safe.
#pragma once

#include <chrono>

namespace loom::wire {

using steady_time = std::chrono::steady_clock::time_point;

// The one heartbeat period of the platform: every service beats to the
// scheduler this often (libs/runtime/registrar.cpp) and the roster counts
// missed beats in it (services/scheduler/roster.hpp), so a dead node is
// noticed within heartbeat_max_missed seconds.
inline constexpr std::chrono::milliseconds heartbeat_interval{1000};
// 3, as in Paranoid Pirate: one lost beat is routine (a GC-like pause, a busy
// link), two in a row happen, three means the peer is gone.
inline constexpr int heartbeat_max_missed = 3;

// Is a peer alive? Dead once `max_missed` whole intervals have passed since
// its last beat.
class liveness {
 public:
  explicit liveness(std::chrono::milliseconds interval, int max_missed = heartbeat_max_missed);

  void beat(steady_time now);
  // false before the first beat: a peer we never heard from is not alive.
  bool alive(steady_time now) const;
  // Whole intervals since the last beat; max_missed before the first beat.
  int missed(steady_time now) const;

 private:
  std::chrono::milliseconds interval_;
  int max_missed_;
  bool heard_ = false;
  steady_time last_{};
};

// When should the sender beat next? Due at once, then every interval.
class heartbeat_schedule {
 public:
  explicit heartbeat_schedule(std::chrono::milliseconds interval);

  bool due(steady_time now) const;
  void sent(steady_time now);
  // Time until the next beat is due (0 if due): a poll timeout for the loop.
  std::chrono::milliseconds until_due(steady_time now) const;

 private:
  std::chrono::milliseconds interval_;
  bool ever_sent_ = false;
  steady_time last_{};
};

// The sender's own account of a silence (issue 32): how long since the
// scheduler last answered it, and how far behind its plan its own loop ran
// meanwhile. A cut link shows a long silence with the loop on time; a stopped
// or starved process shows the loop late by about the silence. The scheduler
// forgives a trainer's loss only for the first (services/scheduler/jobs).
class outage_log {
 public:
  struct report {
    std::chrono::milliseconds silent{0};  // since the last answer (0 before the first)
    std::chrono::milliseconds late{0};    // the most one step of the loop ran past its plan
  };
  // A step of the sender's loop (a wait, a call) took `took` where it planned
  // at most `planned`.
  void ran(std::chrono::milliseconds took, std::chrono::milliseconds planned);
  // The account since the last answer, as of now (what a registration reports).
  report since_answer(steady_time now) const;
  // An answer came: the silence ends.
  void answered(steady_time now);

 private:
  bool heard_ = false;
  steady_time last_answer_{};
  std::chrono::milliseconds late_{0};
};

}  // namespace loom::wire
