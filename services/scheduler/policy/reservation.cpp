// The EASY reservation of the blocked head (rule 4) and the make-room what-ifs
// of rule 3: shrinking borrowed elastic capacity and evicting lower-priority
// jobs. Both work on a scratch per-node delta (delta_) added to the free
// capacity, and a per-zone count of head members that would fit, updated node
// by node, so a what-if costs O(nodes in the zone + members touched).
#include "services/scheduler/policy/policy.hpp"

#include <algorithm>
#include <tuple>

namespace loom::scheduler::policy {

void policy::clear_reservation() {
  for (auto n : plan_nodes_) in_plan_[n] = 0;
  plan_nodes_.clear();
  holder_.reset();
  shadow_ = never;
  plan_dirty_ = true;
}

void policy::reset_delta() {
  for (auto n : touched_) delta_[n] = {};
  touched_.clear();
}

void policy::add_delta(std::uint32_t n, const resources& r) {
  if (delta_[n] == resources{}) touched_.push_back(n);
  delta_[n] = delta_[n] + r;
}

// Earliest time the head fits, walking running jobs by estimated end and freeing
// their members. Capacity that elastic jobs borrowed above their minimum (the tail of
// their member list) counts as free at once when the head may reclaim it. Then fixes
// which nodes the head will use at that time; slack_ = what such a node will have
// then, minus what the head needs there. Kept until the plan is dirty (nodes changed,
// a job ahead of the holder took capacity) or its time has passed.
void policy::ensure_reservation(job_rec& head, time_ms now) {
  if (!plan_dirty_ && (shadow_ == never || now <= shadow_)) return;
  for (auto n : plan_nodes_) in_plan_[n] = 0;
  plan_nodes_.clear();
  plan_dirty_ = false;
  shadow_ = never;
  const resources& pm = head.spec.per_member;
  std::vector<char> allowed(cluster_.zone_count(), head.any_zone ? 1 : 0);
  for (auto z : head.zones) allowed[z] = 1;
  auto capx = [&](std::uint32_t n) { return cluster_.node(n).free + delta_[n]; };
  auto counted = [&](const job_rec& r) { return r.prio_key <= head.prio_key ? borrowed(r) : 0u; };
  for (std::uint32_t z = 0; z < cluster_.zone_count(); ++z) {
    if (!allowed[z]) continue;
    for (const auto& [np, seq, id] : elastic_in_zone_[z]) {
      const job_rec& e = jobs_.at(id);
      for (std::size_t i = e.members.size() - counted(e); i < e.members.size(); ++i) add_delta(e.members[i], e.spec.per_member);
    }
  }
  std::vector<std::uint64_t> cnt(cluster_.zone_count(), 0);
  std::optional<std::uint32_t> zone;
  time_ms at = now + cfg_.overrun_step;  // fits already: should have started; look again soon
  for (std::uint32_t z = 0; z < cluster_.zone_count(); ++z) {
    if (!allowed[z]) continue;
    for (auto n : cluster_.zone_nodes(z))
      if (cluster_.node(n).placeable()) cnt[z] += members_fitting(capx(n), pm);
    if (!zone && cnt[z] >= head.min_size) zone = z;
  }
  if (!zone) {
    for (const auto& [end, id] : by_end_) {
      const job_rec& r = jobs_.at(id);
      if (!allowed[r.zone]) continue;
      std::size_t upto = r.members.size() - counted(r);
      for (std::size_t i = 0; i < upto; ++i) {
        std::uint32_t n = r.members[i];
        if (!cluster_.node(n).placeable()) continue;  // a draining node's room is not for the head
        cnt[r.zone] -= members_fitting(capx(n), pm);
        add_delta(n, r.spec.per_member);
        cnt[r.zone] += members_fitting(capx(n), pm);
      }
      if (cnt[r.zone] >= head.min_size) {
        zone = r.zone;
        at = end >= now ? end : now + cfg_.overrun_step;  // overrunning: assume it ends soon
        break;
      }
    }
  }
  if (zone) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> nodes;  // (gpus then, node): best fit
    for (auto n : cluster_.zone_nodes(*zone))
      if (cluster_.node(n).placeable() && members_fitting(capx(n), pm) > 0) nodes.emplace_back(capx(n).gpus, n);
    std::sort(nodes.begin(), nodes.end());
    std::uint32_t need = head.min_size;
    for (auto [g, n] : nodes) {
      std::uint32_t k = std::min(members_fitting(capx(n), pm), need);
      in_plan_[n] = 1;
      slack_[n] = capx(n) - pm * k;
      plan_nodes_.push_back(n);
      need -= k;
      if (need == 0) break;
    }
    shadow_ = at;
  }
  reset_delta();
}

// Rule 3 as a what-if per allowed zone: actions are "drop one borrowed member of an
// elastic job" (tail first, lowest priority and youngest job first) then, when
// `evict`, "stop a whole lower-priority job past its min_runtime" (cheapest first).
// Apply them until the job fits, then undo, last first, every action not needed.
// Commit the cheapest zone's actions only if the job then starts.
bool policy::try_make_room(job_rec& j, fit_mode mode, bool evict, time_ms now, decisions& out) {
  if (evict && evict_failed_for_ == j.spec.id && evict_failed_epoch_ == capacity_epoch_ && now < evict_retry_at_)
    return false;
  const resources& pm = j.spec.per_member;
  struct act {
    job_rec* job;
    bool evict;
    std::uint32_t member;  // shrink: index in job->members
    double cost;
    bool on;
  };
  auto capm = [&](std::uint32_t n) {
    resources c = cluster_.node(n).free + delta_[n];
    return (mode == fit_mode::long_fill && in_plan_[n]) ? min_of(c, slack_[n]) : c;
  };
  std::uint64_t cnt = 0;
  auto change = [&](std::uint32_t n, const resources& r, bool add) {
    const bool counts = cluster_.node(n).placeable();  // room on a draining node is no room
    if (counts) cnt -= members_fitting(capm(n), pm);
    if (add) add_delta(n, r);
    else delta_[n] = delta_[n] - r;
    if (counts) cnt += members_fitting(capm(n), pm);
  };
  std::vector<act> acts;
  std::vector<act> best;
  std::uint32_t best_zone = 0;
  double best_cost = 0;
  bool found = false;
  time_ms next_mature = never;
  std::vector<job_rec*> cands;
  for (std::uint32_t z : zones_of(j)) {
    acts.clear();
    // Quick rejection: even every borrowed and every lower-priority GPU would not do.
    std::uint64_t bound = cluster_.zone(z).free.gpus + zone_borrowed_gpus_[z];
    if (evict)
      for (const auto& [prio, g] : zone_prio_gpus_[z])
        if (prio < j.prio_key) bound += g;
    if (bound < std::uint64_t(j.min_size) * pm.gpus) continue;
    std::uint64_t gpus = cluster_.zone(z).free.gpus;
    cands.clear();
    for (const auto& [np, seq, id] : elastic_in_zone_[z]) {
      job_rec& e = jobs_.at(id);
      if (e.spec.id != j.spec.id && e.prio_key <= j.prio_key && borrowed(e) > 0) cands.push_back(&e);
    }
    std::sort(cands.begin(), cands.end(), [](const job_rec* a, const job_rec* b) {
      return std::tie(a->prio_key, b->seq) < std::tie(b->prio_key, a->seq);
    });
    for (job_rec* e : cands)
      for (std::uint32_t k = 0; k < borrowed(*e); ++k) {
        acts.push_back({e, false, static_cast<std::uint32_t>(e->members.size()) - 1 - k, 1e-9, false});
        gpus += pm.gpus ? e->spec.per_member.gpus : 0;
      }
    std::size_t shrink_end = acts.size();
    if (evict) {
      for (job_id id : running_in_zone_[z]) {
        job_rec& v = jobs_.at(id);
        if (v.prio_key >= j.prio_key) continue;
        if (now - v.started < v.spec.min_runtime) {
          next_mature = std::min(next_mature, v.started + v.spec.min_runtime);
          continue;
        }
        time_ms lost = v.spec.checkpointable ? cfg_.restart_cost : now - v.started;
        double g = double(v.members.size()) * v.spec.per_member.gpus;
        acts.push_back({&v, true, 0, double(lost) * std::max(g, 1.0), false});
        gpus += static_cast<std::uint64_t>(g);
      }
      std::sort(acts.begin() + static_cast<std::ptrdiff_t>(shrink_end), acts.end(), [](const act& a, const act& b) {
        return std::make_tuple(a.job->prio_key, a.cost, a.job->members.size() * a.job->spec.per_member.gpus, a.job->spec.id) <
               std::make_tuple(b.job->prio_key, b.cost, b.job->members.size() * b.job->spec.per_member.gpus, b.job->spec.id);
      });
    }
    if (acts.empty() || gpus < std::uint64_t(j.min_size) * pm.gpus) continue;
    cnt = 0;
    for (auto n : cluster_.zone_nodes(z))
      if (cluster_.node(n).placeable()) cnt += members_fitting(capm(n), pm);
    auto apply = [&](std::size_t i, bool on) {
      act& a = acts[i];
      a.on = on;
      if (!a.evict) {
        change(a.job->members[a.member], a.job->spec.per_member, on);
        return;
      }
      // An evicted job releases everything; its own shrink actions no longer apply.
      if (on)
        for (std::size_t s = 0; s < shrink_end; ++s)
          if (acts[s].on && acts[s].job == a.job) {
            acts[s].on = false;
            change(a.job->members[acts[s].member], a.job->spec.per_member, false);
          }
      for (auto n : a.job->members) change(n, a.job->spec.per_member, on);
    };
    std::size_t used = 0;
    while (cnt < j.min_size && used < acts.size()) apply(used++, true);
    if (cnt >= j.min_size) {
      std::vector<const job_rec*> kept_tail;  // jobs with a later (deeper) shrink kept
      for (std::size_t i = used; i-- > 0;) {
        act& a = acts[i];
        if (!a.on) continue;
        if (!a.evict && std::find(kept_tail.begin(), kept_tail.end(), a.job) != kept_tail.end()) continue;
        apply(i, false);
        if (cnt < j.min_size) {
          apply(i, true);
          if (!a.evict) kept_tail.push_back(a.job);
        }
      }
      double cost = 0;
      for (std::size_t i = 0; i < used; ++i)
        if (acts[i].on) cost += acts[i].cost;
      if (!found || cost < best_cost) {
        found = true;
        best_cost = cost;
        best_zone = z;
        best.clear();
        for (std::size_t i = 0; i < used; ++i)
          if (acts[i].on) best.push_back(acts[i]);
      }
    }
    reset_delta();
  }
  if (!found) {
    if (evict) {
      evict_failed_for_ = j.spec.id;
      evict_failed_epoch_ = capacity_epoch_;
      evict_retry_at_ = next_mature;
    }
    return false;
  }
  // Commit: shrinks (grouped per job, tail first), then evictions, then the placement.
  std::vector<std::pair<job_rec*, std::uint32_t>> shrinks;
  for (const act& a : best) {
    if (a.evict) continue;
    auto it = std::find_if(shrinks.begin(), shrinks.end(), [&](auto& s) { return s.first == a.job; });
    if (it == shrinks.end()) shrinks.emplace_back(a.job, 1);
    else ++it->second;
  }
  for (auto [e, m] : shrinks) {
    std::size_t keep = e->members.size() - m;
    std::vector<std::uint32_t> gone(e->members.begin() + static_cast<std::ptrdiff_t>(keep), e->members.end());
    drop_members(*e, keep);
    out.push_back({action::shrink, e->spec.id, ids(gone), static_cast<std::uint32_t>(keep), false,
                   e->prio_key < j.prio_key ? reason::higher_priority : reason::reclaim, j.spec.id});
  }
  for (const act& a : best) {
    if (!a.evict) continue;
    out.push_back({action::preempt, a.job->spec.id, {}, 0, a.job->spec.checkpointable, reason::higher_priority, j.spec.id});
    stop(*a.job);
  }
  return place_in(j, best_zone, mode, now, out, mode == fit_mode::now ? reason::fits : reason::backfill);
}

}  // namespace loom::scheduler::policy
