#include "services/scheduler/jobs/load_shedding.hpp"

#include "libs/runspec/job_template.hpp"

#include <tuple>

namespace loom::scheduler {

void load_shedding::heard(const std::string& node, const std::string& level, const std::string& why) {
  node_pressure& n = nodes_[node];
  // A trainer's words: one of the three levels (anything else is ok), and a
  // reason of bounded length (it becomes job event text).
  n.level = level == "high" || level == "sustained" ? level : "ok";
  n.why = why.size() > max_why ? why.substr(0, max_why) + "..." : why;
  if (n.level == "sustained") n.closed = true;
  else if (n.level == "ok") n.closed = false;  // high keeps a closed node closed: it has not passed
}

bool load_shedding::closed(const std::string& node) const {
  auto it = nodes_.find(node);
  return it != nodes_.end() && it->second.closed;
}

std::optional<load_shedding::pause> load_shedding::due(const jobs_context& cx,
                                                         const std::function<bool(const jobs_context::slot&)>& eligible,
                                                         time_point now) {
  if (next_pause_ && now < *next_pause_) return std::nullopt;
  struct candidate {
    int priority;
    std::int64_t started_ns;
    std::string node;
  };
  std::map<std::string, std::vector<candidate>> by_zone;  // stages (rank 0's node) on sustained nodes
  for (const auto& [node, p] : nodes_) {
    if (p.level != "sustained") continue;
    auto s = cx.slots_.find(node);
    if (s == cx.slots_.end() || !eligible(s->second)) continue;
    const job_rec& j = cx.jobs_.at(s->second.job);
    const stage_rec& st = j.stages[s->second.stage];
    if (st.state != "running") continue;
    by_zone[cx.zone_of(j)].push_back({runspec::priority_of(j.priority_class), st.started_ns, node});
  }
  std::optional<candidate> pick;
  int top = 0;
  for (const auto& [zone, cs] : by_zone) {
    int highest = cs.front().priority;
    for (const auto& c : cs) highest = std::max(highest, c.priority);
    for (const auto& c : cs) {
      if (c.priority >= highest) continue;  // never the zone's most important work
      // The lowest class; among equals the latest started (it has the least to lose).
      if (!pick || std::tie(c.priority, pick->started_ns) < std::tie(pick->priority, c.started_ns)) {
        pick = c;
        top = highest;
      }
    }
  }
  if (!pick) return std::nullopt;
  const jobs_context::slot& sl = cx.slots_.at(pick->node);
  const job_rec& j = cx.jobs_.at(sl.job);
  const stage_rec& st = j.stages[sl.stage];
  pause out;
  out.pid = jobs_context::pid_of(j, sl.stage);
  out.job = j.id;
  out.stage = st.name;
  out.node = pick->node;
  out.why = "load shedding: trainer " + pick->node + " is pressed (" + nodes_.at(pick->node).why + ")" +
            (st.members.size() > 1 ? " and " + cx.member_list(st.members) + " run this stage" : "") +
            "; priority " + (j.priority_class.empty() ? std::string("normal") : j.priority_class) + " (" +
            std::to_string(pick->priority) + ") is the lowest of the pressed trainers' work (highest " +
            std::to_string(top) + "): checkpointed and queued again, it resumes once the pressure passes";
  next_pause_ = now + pause_cooldown;
  return out;
}

}  // namespace loom::scheduler
