// site_stages (site_stages.hpp), edge-site stages (issue 15): a diloco stage whose [diloco]
// names sites (sites = ["north", "south"]) has member r on a trainer of zone
// sites[r]. The policy places a gang inside one zone, so these stages are
// placed here instead, outside it:
//
//   queued ──(every site has a free live trainer)──▶ running, member r on a trainer of sites[r]
//   running, member r's trainer lost ──▶ another free trainer of sites[r] (or the same one
//            when it returns) takes rank r; the other members train on meanwhile
//   a member's trainer polls `running` with no slot here (this scheduler restarted and did
//            not see it alive yet) ──▶ taken back as it is (readopt), never told to stop
//   a named site revoked ──▶ failed, naming the site; every member's next poll is told to stop
//
// At submit every named site must be enrolled (check): an unknown,
// pending or revoked one is refused naming it and the enrolled ones.
// A trainer that holds such a member is cordoned in the policy (tick), so no
// policy job lands on it; it is released when the stage ends. Runs on the
// scheduler actor's thread, like the rest of the job manager.
#include "services/scheduler/jobs/site_stages.hpp"

#include "libs/runspec/run_config.hpp"

#include <algorithm>

namespace loom::scheduler {

const std::vector<std::string>& site_stages::zones(const job_rec& j, std::size_t i) const {
  const std::string key = j.id + "/" + j.stages[i].name;
  auto it = zones_.find(key);
  if (it != zones_.end()) return it->second;
  std::vector<std::string> names;
  if (j.stages[i].config_toml.find("diloco") != std::string::npos) {  // most stages: no parse
    auto spec = runspec::parse_run_config(j.stages[i].config_toml, key);
    if (spec && spec->is_diloco()) names = spec->diloco.site_names;
  }
  return zones_.emplace(key, std::move(names)).first->second;
}

bool site_stages::held(const jobs_context& cx, const std::string& node) const {
  auto sl = cx.slots_.find(node);
  if (sl == cx.slots_.end()) return false;
  const job_rec& j = cx.jobs_.at(sl->second.job);
  return is_site_stage(j, sl->second.stage);
}

std::string site_stages::free_trainer(const jobs_context& cx, const roster& nodes, const std::string& zone,
                                      const std::string& prefer, time_point now) const {
  auto usable = [&](const node& n) {
    return n.service == "trainer" && n.zone == zone && !n.draining && nodes.state(n, now) != node_state::dead &&
           !cx.slots_.count(n.id);
  };
  if (const node* p = prefer.empty() ? nullptr : nodes.find(prefer); p && usable(*p)) return p->id;
  for (const auto& [id, n] : nodes.all())
    if (usable(n)) return n.id;
  return "";
}

void site_stages::hold(jobs_context& cx, const std::string& node, const std::string& job, std::size_t stage,
                       std::uint32_t rank, time_point now) {
  cx.slots_[node] = jobs_context::slot{job, stage, rank, false, 0, false, 0};
  if (auto id = cx.node_ids_.find(node); id != cx.node_ids_.end() && cx.in_policy_[node] && !cx.cordoned_[node]) {
    auto d = cx.policy_.set_draining(id->second, true, cx.ms(now));
    if (d) {
      cx.cordoned_[node] = true;
      cx.apply(*d, now);
    }
  }
}

bool site_stages::readopt(jobs_context& cx, const poll_report& r, time_point now) {
  auto jt = cx.jobs_.find(r.job);
  if (r.state != "running" || jt == cx.jobs_.end() || jt->second.terminal()) return false;
  job_rec& j = jt->second;
  for (std::size_t i = 0; i < j.stages.size(); ++i) {
    const stage_rec& s = j.stages[i];
    if (s.name != r.stage || s.state != "running" || s.generation != r.generation || !is_site_stage(j, i)) continue;
    for (std::uint32_t rank = 0; rank < s.members.size(); ++rank) {
      if (s.members[rank] != r.node) continue;
      hold(cx, r.node, j.id, i, rank, now);
      jobs_context::slot& sl = cx.slots_.at(r.node);
      sl.delivered = true;  // it runs this formation: no restart
      sl.running_gen = s.generation;
      return true;
    }
  }
  return false;
}

bool site_stages::enrolled_site(const std::string& zone) const {
  if (!site_states_) return false;
  auto states = site_states_();
  if (!states) return false;
  auto it = states->find(zone);
  return it != states->end() && it->second == "enrolled";
}

status site_stages::check(const runspec::job_plan& plan) const {
  if (!site_states_) return ok_status();
  bool named = false;
  for (const auto& st : plan.stages) named |= !st.spec.diloco.site_names.empty();
  if (!named) return ok_status();
  auto states = site_states_();
  if (!states) return make_error(errc::unavailable, "the sites registry: " + states.err().message);
  std::string enrolled;
  for (const auto& [name, state] : *states)
    if (state == "enrolled") enrolled += (enrolled.empty() ? "" : ", ") + name;
  for (const auto& st : plan.stages)
    for (const auto& site : st.spec.diloco.site_names) {
      auto it = states->find(site);
      if (it != states->end() && it->second == "enrolled") continue;
      const std::string what = it == states->end() ? "is not a site of this cloud"
                               : it->second == "revoked" ? "was revoked"
                                                         : "is not enrolled yet (" + it->second + ")";
      return make_error(errc::invalid_argument, "stage " + st.name + ": diloco.sites names " + site + ", which " +
                                                    what + "; enrolled sites: " +
                                                    (enrolled.empty() ? "none" : enrolled));
    }
  return ok_status();
}

void site_stages::revoked(jobs_context& cx, const std::string& site, const std::string& reason, time_point now) {
  revoked_sites_[site] = reason;
  for (auto& [id, j] : cx.jobs_) {
    if (j.terminal()) continue;
    for (std::size_t i = 0; i < j.stages.size(); ++i) {
      const stage_rec& s = j.stages[i];
      if ((s.state == "queued" || s.state == "running") && is_site_stage(j, i) && fail_if_revoked(cx, j, i, now)) break;
    }
  }
}

bool site_stages::fail_if_revoked(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  for (const auto& zone : zones(j, i)) {
    auto it = revoked_sites_.find(zone);
    if (it == revoked_sites_.end()) continue;
    cx.stage_done(j, i, false,
               "site " + zone + " was revoked" + (it->second.empty() ? "" : " (" + it->second + ")") +
                   ": the stage cannot run without it",
               now);
    return true;
  }
  return false;
}

void site_stages::place(jobs_context& cx, const roster& nodes, time_point now) {
  for (auto& [id, j] : cx.jobs_) {
    if (j.terminal()) continue;
    for (std::size_t i = 0; i < j.stages.size(); ++i) {
      stage_rec& s = j.stages[i];
      if ((s.state != "queued" && s.state != "running") || !is_site_stage(j, i)) continue;
      if (fail_if_revoked(cx, j, i, now)) break;  // a later stage's site, revoked since the job was admitted
      const auto& sites = zones(j, i);
      if (s.state == "queued") {
        std::vector<std::string> members;
        for (const auto& zone : sites) {
          std::string n = free_trainer(cx, nodes, zone, "", now);
          if (n.empty() || std::find(members.begin(), members.end(), n) != members.end()) break;
          members.push_back(n);
        }
        if (members.size() != sites.size()) continue;  // waiting(): which site has none free
        s.state = "running";
        ++s.attempts;
        if (s.started_ns == 0) s.started_ns = cx.ns(now);
        j.state = "running";
        cx.set_members(j, i, members);
        for (std::uint32_t r = 0; r < members.size(); ++r) hold(cx, members[r], j.id, i, r, now);
        std::string where;
        for (std::size_t r = 0; r < members.size(); ++r)
          where += (r ? ", " : "") + members[r] + " (site " + sites[r] + ")";
        (void)cx.record(j, s.name, "placed", "on " + where + " (attempt " + std::to_string(s.attempts) + ")", now);
        continue;
      }
      // Running: a member whose trainer was lost is re-placed inside its own site only.
      for (std::uint32_t r = 0; r < s.members.size() && r < sites.size(); ++r) {
        auto sl = cx.slots_.find(s.members[r]);
        if (sl != cx.slots_.end() && sl->second.job == j.id && sl->second.stage == i) continue;
        const std::string n = free_trainer(cx, nodes, sites[r], s.members[r], now);
        if (n.empty()) continue;  // the site has no trainer now: the others train on
        const std::string was = s.members[r];
        s.members[r] = n;
        if (r == 0) s.node = n;
        hold(cx, n, j.id, i, r, now);
        (void)cx.record(j, s.name, "replaced",
                     "site " + sites[r] + "'s member " + std::to_string(r) + ": " +
                         (n == was ? n + " is back" : was + " lost, now on " + n + " (same site)"),
                     now);
      }
    }
  }
}

void site_stages::reattach(jobs_context& cx, job_rec& j, std::size_t i, time_point now) {
  const stage_rec& s = j.stages[i];
  for (std::uint32_t r = 0; r < s.members.size(); ++r)
    if (cx.node_ids_.count(s.members[r]) && cx.in_policy_[s.members[r]])
      cx.slots_[s.members[r]] = {j.id, i, r, false, 0, false};
  (void)cx.record(j, s.name, "reattached", "scheduler restarted; stage still on " + cx.member_list(s.members), now,
                  false);
}

std::string site_stages::waiting(const jobs_context& cx, const job_rec& j, std::size_t i, const roster& nodes,
                                 time_point now) const {
  std::string none;
  for (const auto& zone : zones(j, i))
    if (free_trainer(cx, nodes, zone, "", now).empty()) none += (none.empty() ? "" : ", ") + zone;
  return none.empty() ? "placing it on a trainer of each site" : "no free live trainer at site(s) " + none;
}

}  // namespace loom::scheduler
