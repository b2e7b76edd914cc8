#include "services/scheduler/sites/link_state.hpp"

namespace loom::scheduler {

std::string cloud_link_state(const std::string& reported, std::chrono::milliseconds silent_for,
                             std::chrono::milliseconds heartbeat) {
  using std::chrono::milliseconds;
  if (silent_for > 3 * heartbeat + milliseconds(2000)) return "down";
  if (silent_for > heartbeat * 3 / 2 + milliseconds(500) && (reported == "up" || reported == "unknown" || reported.empty()))
    return "degraded";
  return reported.empty() ? std::string("unknown") : reported;
}

}  // namespace loom::scheduler
