// loom::runtime::restart_policy: Erlang/OTP restart intensity. A supervisor
// restarts a crashed child unless more than `max_restarts` crashes fall within
// the last `window`; then it escalates (gives up and fails itself).
// Pure: time is passed in. Not thread-safe; owned by one supervisor.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>

namespace loom::runtime {

class restart_policy {
 public:
  using clock = std::chrono::steady_clock;
  enum class verdict { restart, escalate };

  // REQUIRES: max_restarts >= 0 (negative counts as 0), window > 0.
  // OTP's defaults are 1 restart in 5 s; actor_host uses 5 in 60 s because a
  // service restart is cheap and a flapping dependency should get a few tries.
  restart_policy(int max_restarts, std::chrono::milliseconds window);

  // Records a crash at `now` (non-decreasing across calls). A crash at t is
  // inside the window at `now` while now - t < window.
  verdict on_crash(clock::time_point now);
  // Crashes recorded inside the window ending at `now`.
  int crashes_in_window(clock::time_point now) const;
  // How many times on_crash() answered restart.
  std::uint64_t total_restarts() const { return total_restarts_; }

 private:
  void forget_before(clock::time_point now);

  int max_restarts_;
  std::chrono::milliseconds window_;
  std::deque<clock::time_point> crashes_;  // oldest first; at most max_restarts_ + 1 kept
  std::uint64_t total_restarts_ = 0;
};

}  // namespace loom::runtime
