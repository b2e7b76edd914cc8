// load_shedding: the scheduler's side of load shedding (issue 30, item 3).
// Each trainer's poll says how pressed its machine is (ok, high, sustained:
// libs/runtime/pressure.hpp). A trainer lowers its own micro-batch while
// high; when that was not enough and the pressure is sustained:
//   1. the node is closed: the policy gives it nothing new (a drain of its
//      own, apart from an admin's) until it reports ok again;
//   2. among the stages running on sustained nodes of a zone, the one of the
//      lowest priority class — strictly below the highest there: core work
//      is never paused for lesser work — is paused (policy::pause: checkpoint,
//      then queued again at its old position; job event "paused", audited as
//      job.paused), at most one per `pause_cooldown`, so the first pause's
//      effect is read before another.
// Only stages the policy placed are paused: an hpo trial's segment and an
// edge site's stage belong to their placers. Soft state: a new leader hears
// every trainer again within a poll. Owned by the job manager; not thread-safe.
#pragma once

#include "services/scheduler/jobs/jobs_context.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace loom::scheduler {

class load_shedding {
 public:
  static constexpr std::chrono::seconds pause_cooldown{10};
  static constexpr std::size_t max_why = 300;  // of a trainer's reason, kept

  // A trainer's poll: its level (ok, high, sustained; anything else, and ""
  // from an older trainer, is ok) and why (cut at max_why).
  void heard(const std::string& node, const std::string& level, const std::string& why);
  // Sustained seen and not ok since: the policy must not place work there.
  bool closed(const std::string& node) const;
  void forget(const std::string& node) { nodes_.erase(node); }

  struct pause {
    policy::job_id pid = 0;
    std::string job, stage, node;
    std::string why;  // the job event's text
  };
  // The pause due now, if any (see above); `eligible` says whether a slot's
  // stage is the policy's. Moves the cooldown on when it returns one.
  std::optional<pause> due(const jobs_context& cx, const std::function<bool(const jobs_context::slot&)>& eligible,
                           time_point now);

 private:
  struct node_pressure {
    std::string level = "ok", why;
    bool closed = false;
  };
  std::map<std::string, node_pressure> nodes_;
  std::optional<time_point> next_pause_;
};

}  // namespace loom::scheduler
