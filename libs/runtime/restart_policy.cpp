#include "libs/runtime/restart_policy.hpp"

#include <algorithm>

namespace loom::runtime {

restart_policy::restart_policy(int max_restarts, std::chrono::milliseconds window)
    : max_restarts_(std::max(max_restarts, 0)), window_(window) {}

restart_policy::verdict restart_policy::on_crash(clock::time_point now) {
  forget_before(now);
  crashes_.push_back(now);
  // Only the newest max_restarts_ + 1 crashes can ever decide a verdict.
  while (crashes_.size() > static_cast<std::size_t>(max_restarts_) + 1) crashes_.pop_front();
  if (crashes_.size() > static_cast<std::size_t>(max_restarts_)) return verdict::escalate;
  ++total_restarts_;
  return verdict::restart;
}

int restart_policy::crashes_in_window(clock::time_point now) const {
  return static_cast<int>(std::count_if(crashes_.begin(), crashes_.end(),
                                        [&](clock::time_point t) { return now - t < window_; }));
}

void restart_policy::forget_before(clock::time_point now) {
  while (!crashes_.empty() && now - crashes_.front() >= window_) crashes_.pop_front();
}

}  // namespace loom::runtime
