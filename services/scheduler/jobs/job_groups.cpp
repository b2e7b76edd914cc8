// policy_stages' group protocol (policy_stages.hpp): a placed stage's
// members by rank, each member's poll (rank 0 speaks for the group: progress,
// snapshots, the end; any member may fail it or ask to regroup), the group's
// generation, and the assignment each member is given with its peers. An
// edge-site stage's members speak it too (site_stages places them).
#include "services/scheduler/jobs/policy_stages.hpp"

#include "libs/runspec/job_template.hpp"
#include "services/scheduler/jobs/aggregation_grant.hpp"

#include <algorithm>

namespace loom::scheduler {

void policy_stages::heard(const poll_report& r) {
  if (!r.peer_endpoint.empty()) peers_[r.node] = {r.node, r.peer_endpoint, r.peer_public_key};
}

poll_answer policy_stages::poll(jobs_context& cx, const poll_report& r, jobs_context::slot& sl, bool site_stage,
                                time_point now) {
  poll_answer out;
  job_rec& j = cx.jobs_.at(sl.job);
  const std::size_t i = sl.stage;
  stage_rec& s = j.stages[i];
  const bool ends = (r.state == "succeeded" || r.state == "failed") && !r.job.empty();
  const bool mine = r.job == j.id && r.stage == s.name;
  // A stage's end counts only from the node that holds it, for the attempt it
  // runs (a report naming none, as from older trainers, is taken as current).
  if (ends && (!mine || (r.attempt != 0 && r.attempt != s.attempts))) {
    out.refused = "node " + r.node + " holds " + j.id + "/" + s.name + " (attempt " + std::to_string(s.attempts) +
                  "): its report of " + r.job + "/" + r.stage + " (attempt " + std::to_string(r.attempt) + ", " +
                  r.state + ") is not applied";
    return out;
  }
  // A group's members must run its current formation; a lone trainer that
  // names no generation (0) runs whatever it was given.
  const bool current = r.generation == s.generation || (r.generation == 0 && s.members.size() <= 1);
  const std::string who = s.members.size() > 1 ? "trainer " + r.node + " (rank " + std::to_string(sl.rank) + " of " +
                                                     std::to_string(s.members.size()) + ")"
                                               : "trainer " + r.node;
  auto deliver = [&] {
    out.work = assignment_of(cx, j, i, sl.rank);
    return out;
  };
  // What the trainer noticed (rollbacks, snapshot fallbacks) becomes job
  // events, each once: a notice's seq is its creation time in ns.
  if (mine)
    for (const auto& n : r.notices) {
      if (n.seq <= sl.notices_acked) continue;
      (void)cx.record(j, s.name, n.kind, (s.members.size() > 1 ? who + ": " : "") + n.text, now, false);
      sl.notices_acked = n.seq;
    }
  out.notices_acked = sl.notices_acked;
  if (mine && current && !r.site.site.empty()) {  // a diloco site's line for `loom job watch`
    auto same = [&](const site_line& x) { return x.site == r.site.site; };
    auto it = std::find_if(s.sites.begin(), s.sites.end(), same);
    if (it != s.sites.end()) {
      auto curve = std::move(it->curve);
      *it = r.site;
      it->curve = std::move(curve);
      diloco::add_curve_point(it->curve, r.site);
    } else {
      s.sites.push_back(r.site);
      s.sites.back().curve.clear();
      diloco::add_curve_point(s.sites.back().curve, r.site);
      std::sort(s.sites.begin(), s.sites.end(), [](const site_line& a, const site_line& b) { return a.site < b.site; });
    }
  }
  if (mine && r.state == "running") {
    if (!current) return deliver();  // the new formation: the trainer stops this one and starts it
    sl.delivered = true;
    sl.running_gen = s.generation;
    if (sl.rank != 0) return deliver();  // rank 0 speaks for the group
    // Only fp32 and bf16 are kept: a trainer's free text never reaches the store.
    const bool new_precision = (r.precision == "fp32" || r.precision == "bf16") && r.precision != s.precision;
    const bool changed = r.step != s.step || r.checkpoint != s.checkpoint || new_precision;
    if (new_precision) s.precision = r.precision;
    s.step = r.step;
    s.loss = r.loss;
    s.tokens_per_s = r.tokens_per_s;
    if (r.first_loss != 0) s.first_loss = r.first_loss;
    if (r.total_steps) s.total_steps = r.total_steps;
    if (r.checkpoint != s.checkpoint && !r.checkpoint.empty()) {
      s.checkpoint = r.checkpoint;
      (void)cx.record(j, s.name, "snapshot", r.checkpoint, now, false);
    }
    if (changed) (void)cx.persist([snap = j, i](store::transaction& tx) { return save_stage(tx, snap, i); });
    return deliver();
  }
  if (mine && current && (r.state == "succeeded" || r.state == "failed") && (sl.rank == 0 || r.state == "failed")) {
    s.step = sl.rank == 0 ? r.step : s.step;
    s.loss = sl.rank == 0 ? r.loss : s.loss;
    if (sl.rank == 0 && r.first_loss != 0) s.first_loss = r.first_loss;
    if (sl.rank == 0 && r.tokens_per_s > 0) s.tokens_per_s = r.tokens_per_s;  // a short stage may end before a running poll
    if (sl.rank == 0 && !r.checkpoint.empty()) s.checkpoint = r.checkpoint;
    if (sl.rank == 0 && (r.precision == "fp32" || r.precision == "bf16")) s.precision = r.precision;
    if (sl.rank == 0 && !r.contributed.empty()) {  // a diloco stage's end (aggregation_grant.hpp)
      s.contributed = r.contributed;
      s.missing = r.missing;
      if (!r.missing.empty())
        (void)cx.record(j, s.name, "contributions",
                        "contributed: " + cx.member_list(r.contributed) + "; never contributed: " +
                            cx.member_list(r.missing) + " (diloco.min_sites allows it)",
                        now, false);
    }
    // A stage of a site's zone run by the site's own trainer keeps its result
    // at the site; an edge-site (diloco) stage's result is the cloud's export.
    const std::string at_site = site_stage ? "" : r.caller_site;
    cx.stage_done(j, i, r.state == "succeeded", sl.rank == 0 ? r.message : who + ": " + r.message, now, at_site);
    return out;  // no work: the next poll may bring the next stage
  }
  if (mine && current && r.state == "succeeded") {  // rank > 0 done: rank 0 ends the stage
    sl.finished = true;
    return out;
  }
  if (mine && current && r.state == "regroup") {
    if (++s.regroups > max_regroups) {
      cx.stage_done(j, i, false,
                    "its group re-formed " + std::to_string(max_regroups) + " times; last: " + who + ": " + r.message,
                    now);
      return out;
    }
    regroup(cx, j, i, who + ": " + r.message, now);
    return deliver();
  }
  if (r.state == "running") {  // running something else: stop it first
    out.stop = true;
    return out;
  }
  if (sl.finished) return out;  // its part is done; waiting for rank 0
  // Idle (or stopped): deliver the assignment. Idle after it had been running
  // this formation means the trainer process restarted: count an attempt, and a
  // group re-forms (the others wait on it; its inbox moved).
  if (sl.delivered && sl.running_gen == s.generation) {
    ++s.attempts;
    sl.delivered = false;
    if (s.members.size() > 1) {
      regroup(cx, j, i, who + " restarted (attempt " + std::to_string(s.attempts) + ")", now);
    } else {
      (void)cx.record(j, s.name, "resumed",
                      "trainer " + r.node + " restarted; resuming from the latest checkpoint (attempt " +
                          std::to_string(s.attempts) + ")",
                      now);
    }
  }
  return deliver();
}

void policy_stages::regroup(jobs_context& cx, job_rec& j, std::size_t i, const std::string& why,
                            time_point now) const {
  stage_rec& s = j.stages[i];
  ++s.generation;
  for (auto& [node, sl] : cx.slots_)
    if (sl.job == j.id && sl.stage == i) sl.finished = false;
  (void)cx.record(j, s.name, "regroup",
                  why + "; the group (" + cx.member_list(s.members) + ") re-forms as generation " +
                      std::to_string(s.generation) + " from the latest checkpoint",
                  now);
}

std::optional<assignment> policy_stages::assignment_of(const jobs_context& cx, const job_rec& j, std::size_t i,
                                                       std::uint32_t rank) const {
  const stage_rec& s = j.stages[i];
  assignment a;
  a.job = j.id;
  a.tenant = j.tenant;
  a.stage = s.name;
  // "${stage.NAME.checkpoint}" (an rl stage's reward model) names that stage's final checkpoint.
  a.config_toml = runspec::fill_stage_references(s.config_toml, j.out_dir);
  a.out_dir = j.out_dir + "/" + s.name;
  // The previous stage's checkpoint, unless the stage names its own start
  // ("${stage.NAME.checkpoint}", filled into its config above).
  if (i > 0 && s.config_toml.find("init_from = '${stage.") == std::string::npos) a.init_from = cx.checkpoints_of(j, i - 1);
  a.attempt = s.attempts;
  a.aggregation_grant = aggregation_grant_for(j, s, a.config_toml, a.out_dir, a.init_from, cx.grant_key_);  // diloco only
  a.rank = rank;
  a.world = static_cast<std::uint32_t>(std::max<std::size_t>(1, s.members.size()));
  a.generation = s.generation;
  if (a.world > 1) {
    for (const auto& m : s.members) {
      auto p = peers_.find(m);
      if (p == peers_.end() || p->second.endpoint.empty()) return std::nullopt;  // not heard from yet
      a.peers.push_back(p->second);
    }
  }
  return a;
}

}  // namespace loom::scheduler
