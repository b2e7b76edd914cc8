// policy_stages: queueing a stage into the scheduling policy, applying the
// policy's decisions about it, and re-attaching it after a restart
// (policy_stages.hpp).
#include "services/scheduler/jobs/policy_stages.hpp"

#include "libs/wire/heartbeat.hpp"

#include <algorithm>

namespace loom::scheduler {

void policy_stages::queue(jobs_context& cx, job_rec& j, std::size_t i, std::optional<policy::job_id> after,
                          time_point now) const {
  auto d = after ? cx.policy_.finish_and_submit(*after, cx.spec_of(j, i), cx.ms(now))
                 : cx.policy_.submit(cx.spec_of(j, i), cx.ms(now));
  if (d) cx.apply(*d, now);
}

void policy_stages::apply(jobs_context& cx, const policy::decision& d, job_rec& j, std::size_t i,
                          time_point now) const {
  stage_rec& s = j.stages[i];
  if (d.what == policy::action::place && !d.nodes.empty()) {
    std::vector<std::string> members;
    for (auto n : d.nodes) members.push_back(cx.node_names_.at(n));
    s.state = "running";
    ++s.attempts;
    if (s.started_ns == 0) s.started_ns = cx.ns(now);
    j.state = "running";
    cx.set_members(j, i, std::move(members));
    (void)cx.record(j, s.name, "placed",
                    "on " + cx.member_list(s.members) + " (attempt " + std::to_string(s.attempts) +
                        (s.members.size() > 1 ? ", a group of " + std::to_string(s.members.size()) + ")" : ")"),
                    now);
  } else if (d.what == policy::action::grow || d.what == policy::action::shrink) {
    std::vector<std::string> members = s.members, changed;
    for (auto n : d.nodes) {
      const std::string name = cx.node_names_.at(n);
      changed.push_back(name);
      if (d.what == policy::action::grow) members.push_back(name);
      else members.erase(std::remove(members.begin(), members.end(), name), members.end());
    }
    cx.set_members(j, i, std::move(members));
    (void)cx.record(j, s.name, d.what == policy::action::grow ? "grew" : "shrank",
                    std::string(d.what == policy::action::grow ? "added " : "released ") + cx.member_list(changed) +
                        " (" + policy::to_string(d.why) + "); " + std::to_string(s.members.size()) +
                        " trainers now, generation " + std::to_string(s.generation) + " from the latest checkpoint",
                    now);
  } else if (d.what == policy::action::requeue && d.why == policy::reason::node_lost &&
             lost_again(cx, s, now) >= max_node_losses) {
    fail_lost(cx, j, i, now);
  } else if (d.what == policy::action::preempt || d.what == policy::action::requeue) {
    cx.clear_members(j, i);
    s.state = "queued";
    const bool paused = d.what == policy::action::preempt && d.why == policy::reason::pressure;
    const std::string why = paused ? cx.pausing_
                            : d.what == policy::action::preempt
                                ? "preempted for a higher-priority job (checkpointed, resumes later)"
                                : "trainer " + s.node + " lost; resumes from its latest checkpoint";
    (void)cx.record(j, s.name, paused ? "paused" : "requeued", why, now);
  }
}

std::uint32_t policy_stages::lost_again(const jobs_context& cx, stage_rec& s, time_point now) {
  // Found by the chaos harness: two link cuts of a few seconds, or a kill -9
  // and a clock step, failed a job that trained on between them. Progress
  // alone does not forgive the earlier loss (a stage that hangs its trainer
  // after twenty steps would take down every node in turn): the trainer lost
  // then must be back, the same one lost again or the other one answering.
  if (s.node_losses > 0 && s.step > s.step_at_loss) {
    const auto back = cx.in_policy_.find(s.lost_from);
    // lost_from is empty after a scheduler restart: unknown, taken as back.
    if (s.lost_from.empty() || s.lost_from == s.node || (back != cx.in_policy_.end() && back->second))
      s.node_losses = 0;
  }
  s.step_at_loss = std::max(s.step_at_loss, s.step);
  s.lost_from = s.node;
  s.lost_ns = cx.ns(now);
  return ++s.node_losses;
}

void policy_stages::cut_off(jobs_context& cx, const std::string& node, std::chrono::milliseconds silent,
                            std::chrono::milliseconds late, time_point now) const {
  using std::chrono::milliseconds;
  // A loop behind by half the death window or more delayed its own beats.
  const milliseconds window = wire::heartbeat_interval * wire::heartbeat_max_missed;
  const bool on_time = late < window / 2;
  // The loss was noticed within the silence (a tick after the beats stopped).
  const std::int64_t from = cx.ns(now) - std::chrono::nanoseconds(silent + 2 * wire::heartbeat_interval).count();
  const auto secs = [](milliseconds d) { return std::to_string(d.count() / 1000) + "." + std::to_string(d.count() % 1000 / 100) + " s"; };
  for (auto& [id, j] : cx.jobs_) {
    if (j.terminal()) continue;
    for (auto& s : j.stages) {
      if (s.lost_from != node || s.node_losses == 0 || s.lost_ns < from || s.state == "failed") continue;
      if (on_time) {
        --s.node_losses;
        s.lost_from.clear();
        (void)cx.record(j, s.name, "cut_off",
                        "trainer " + node + " is back, the same process: the scheduler had not answered it for " +
                            secs(silent) + " while its heartbeats ran on time (a cut link); its loss is not " +
                            "counted against the stage",
                        now);
      } else {
        (void)cx.record(j, s.name, "stalled",
                        "trainer " + node + " is back, the same process, but its own heartbeats ran " + secs(late) +
                            " behind (stopped or starved, not a cut link): its loss counts against the stage",
                        now, false);
      }
    }
  }
}

void policy_stages::fail_lost(jobs_context& cx, job_rec& j, std::size_t i, time_point now) const {
  stage_rec& s = j.stages[i];
  const std::string lost = s.node;
  cx.clear_members(j, i);
  s.state = "failed";
  s.finished_ns = cx.ns(now);
  j.state = "failed";
  j.message = "stage " + s.name + ": its trainer stopped answering " + std::to_string(s.node_losses) +
              " times while running it (last: " + lost + "); not placing it again unchanged — check " +
              "train.threads and train.batch against the node (estimated " +
              std::to_string(s.memory_bytes >> 20) + " MiB per trainer)";
  for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
  (void)cx.record(j, s.name, "stage_failed", j.message, now);
  // The policy queued it again (and may have placed it in the same pass):
  // out of the policy, and what its room allows now.
  if (auto d = cx.policy_.cancel(cx.pid_of(j, i), cx.ms(now))) cx.apply(*d, now);
}

bool policy_stages::reload(jobs_context& cx, job_rec& j, std::size_t i, time_point now) const {
  stage_rec& s = j.stages[i];
  if (s.members.empty()) s.members = {s.node};  // a row from before groups (migration v3)
  std::vector<policy::node_id> held;
  std::vector<std::string> dead;
  for (const auto& m : s.members) {
    auto n = cx.node_ids_.find(m);
    if (n != cx.node_ids_.end() && cx.in_policy_[m]) held.push_back(n->second);
    else dead.push_back(m);
  }
  if (dead.empty()) {
    auto d = cx.policy_.restore_running(cx.spec_of(j, i), held, cx.ms(now), cx.ms(now));
    if (d) {
      for (std::uint32_t r = 0; r < s.members.size(); ++r) cx.slots_[s.members[r]] = {j.id, i, r, false, 0, false};
      (void)cx.record(j, s.name, "reattached", "scheduler restarted; stage still on " + cx.member_list(s.members),
                      now, false);
      cx.apply(*d, now);
      return true;
    }
  }
  s.state = "queued";
  cx.clear_members(j, i);
  (void)cx.record(j, s.name, "requeued",
                  "scheduler restarted; trainer " + (dead.empty() ? s.node : cx.member_list(dead)) + " is not alive",
                  now);
  return false;
}

}  // namespace loom::scheduler
