// The policy's node events: a node joins, drains (keeps its members, takes no
// new ones) or is lost (its gangs requeued, elastic jobs shrunk), and a job
// paused because its nodes are pressed (load shedding). Split from policy.cpp,
// which keeps the job events and the scheduling pass.
#include "services/scheduler/policy/policy.hpp"

#include <algorithm>

namespace loom::scheduler::policy {

result<policy::decisions> policy::add_node(const node_spec& n, time_ms now) {
  auto idx = cluster_.add_node(n);
  if (!idx) return idx.err();
  resize_zones();
  in_plan_.resize(cluster_.size(), 0);
  slack_.resize(cluster_.size());
  delta_.resize(cluster_.size());
  plan_dirty_ = true;
  ++capacity_epoch_;
  decisions out;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::set_draining(node_id id, bool on, time_ms now) {
  auto idx = cluster_.index_of(id);
  if (!idx || !cluster_.node(*idx).alive) return make_error(errc::not_found, "node " + std::to_string(id) + " is not present");
  decisions out;
  if (cluster_.node(*idx).cordoned == on) return out;
  cluster_.set_cordoned(*idx, on);
  clear_reservation();
  ++capacity_epoch_;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::remove_node(node_id id, time_ms now) {
  auto idx = cluster_.index_of(id);
  if (!idx || !cluster_.node(*idx).alive) return make_error(errc::not_found, "node " + std::to_string(id) + " is not present");
  decisions out;
  std::vector<job_id> hit = cluster_.node(*idx).jobs;
  std::sort(hit.begin(), hit.end());
  for (job_id jid : hit) {
    job_rec& j = jobs_.at(jid);
    std::vector<std::uint32_t> keep, lost;
    for (auto m : j.members) (m == *idx ? lost : keep).push_back(m);
    if (j.elastic() && keep.size() >= j.min_size) {
      // Move the lost members to the tail, then drop the tail: the survivors keep running.
      keep.insert(keep.end(), lost.begin(), lost.end());
      j.members = keep;
      drop_members(j, keep.size() - lost.size());
      out.push_back({action::shrink, jid, ids(lost), static_cast<std::uint32_t>(j.members.size()), false, reason::node_lost, 0});
    } else {
      stop(j);
      out.push_back({action::requeue, jid, {}, 0, false, reason::node_lost, 0});
    }
  }
  if (auto s = cluster_.remove_node(*idx); !s) return s.err();
  clear_reservation();
  ++capacity_epoch_;
  schedule(now, out);
  return out;
}

result<policy::decisions> policy::pause(job_id id, time_ms now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end() || it->second.state != job_state::running)
    return make_error(errc::not_found, "job " + std::to_string(id) + " is not running");
  job_rec& j = it->second;
  decisions out{{action::preempt, id, {}, 0, j.spec.checkpointable, reason::pressure, 0}};
  stop(j);
  clear_reservation();
  ++capacity_epoch_;
  schedule(now, out);
  return out;
}

}  // namespace loom::scheduler::policy
