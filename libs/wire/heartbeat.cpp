#include "libs/wire/heartbeat.hpp"

#include <algorithm>
#include <limits>

namespace loom::wire {

using std::chrono::milliseconds;

liveness::liveness(milliseconds interval, int max_missed)
    : interval_(std::max(interval, milliseconds(1))), max_missed_(std::max(max_missed, 1)) {}

void liveness::beat(steady_time now) {
  // Keep the latest beat even if beats are observed out of order.
  last_ = heard_ ? std::max(last_, now) : now;
  heard_ = true;
}

int liveness::missed(steady_time now) const {
  if (!heard_) return max_missed_;
  if (now <= last_) return 0;
  const auto n = (now - last_) / interval_;  // whole intervals, floor
  return static_cast<int>(std::min<decltype(n)>(n, std::numeric_limits<int>::max()));
}

bool liveness::alive(steady_time now) const { return missed(now) < max_missed_; }

heartbeat_schedule::heartbeat_schedule(milliseconds interval) : interval_(std::max(interval, milliseconds(1))) {}

bool heartbeat_schedule::due(steady_time now) const { return !ever_sent_ || now - last_ >= interval_; }

void heartbeat_schedule::sent(steady_time now) {
  ever_sent_ = true;
  last_ = now;
}

milliseconds heartbeat_schedule::until_due(steady_time now) const {
  if (due(now)) return milliseconds(0);
  return std::chrono::ceil<milliseconds>(last_ + interval_ - now);
}

void outage_log::ran(milliseconds took, milliseconds planned) {
  if (took > planned) late_ = std::max(late_, took - planned);
}

outage_log::report outage_log::since_answer(steady_time now) const {
  report r;
  if (heard_ && now > last_answer_) r.silent = std::chrono::duration_cast<milliseconds>(now - last_answer_);
  r.late = late_;
  return r;
}

void outage_log::answered(steady_time now) {
  heard_ = true;
  last_answer_ = now;
  late_ = milliseconds(0);
}

}  // namespace loom::wire
