#include "services/scheduler/jobs/job_manager.hpp"

#include "libs/store/database.hpp"
#include "libs/files/confine.hpp"
#include "libs/runspec/job_template.hpp"

#include <algorithm>
#include <filesystem>
#include <set>
#include <cstdio>
#include <tuple>

namespace loom::scheduler {
namespace {

// Each trainer node is one slot (a stage takes a whole trainer), with the
// memory a stage may plan for there (admission.hpp: usable_memory).
policy::resources trainer_capacity(const node& n) { return {0, 1, usable_memory(n.resources.memory_bytes)}; }

}  // namespace

job_manager::job_manager(store::database* db, std::string jobs_root, std::chrono::milliseconds min_runtime)
    : db_(db), root_(std::move(jobs_root)), min_runtime_(min_runtime) {}

std::int64_t job_manager::ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

std::string job_manager::request_key(const std::string& principal, const std::string& request_id) {
  return principal + "\n" + request_id;
}

policy::time_ms job_manager::ms(time_point t) const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

status job_manager::persist(unit fn) const {
  if (writer_) {
    writer_(std::move(fn));
    return ok_status();
  }
  if (!db_) return ok_status();
  return db_->with_transaction([&](store::transaction& tx) { return fn(tx); });
}

status job_manager::record(job_rec& j, const std::string& stage, const std::string& kind, const std::string& text,
                           time_point now, bool save_whole) {
  job_event e{j.next_event, ns(now), stage, kind, text};
  j.updated_ns = ns(now);
  ++j.next_event;
  std::optional<job_rec> whole;  // the unit owns what it writes: it may run later
  if (save_whole) whole = j;
  auto st = persist([id = j.id, e, whole = std::move(whole)](store::transaction& tx) -> status {
    if (auto s = add_event(tx, id, e); !s) return s;
    if (whole) return save_job(tx, *whole);
    return ok_status();
  });
  if (!st) --j.next_event;  // not written: the seq is reused by the next event
  else if (sink_) sink_(j, e);
  return st;
}

policy::job_spec job_manager::spec_of(const job_rec& j, std::size_t stage) const {
  policy::job_spec s;
  s.id = pid_of(j, stage);
  s.tenant = j.tenant;
  s.priority = runspec::priority_of(j.priority_class);
  s.zones = {zone_of(j)};  // a job that names no zone runs in the scheduler's own
  s.per_member = {0, 1, j.stages[stage].memory_bytes};
  s.min_members = j.stages[stage].min_trainers;
  s.max_members = j.stages[stage].max_trainers;
  s.estimated_runtime = 600'000;  // 10 min: used for backfill ordering only
  s.min_runtime = min_runtime_.count();  // not preempted before this
  s.checkpointable = true;
  return s;
}

std::optional<policy::node_id> job_manager::node_index(const std::string& node) {
  auto it = node_ids_.find(node);
  if (it != node_ids_.end()) return it->second;
  const auto id = static_cast<policy::node_id>(node_ids_.size());
  node_ids_[node] = id;
  node_names_[id] = node;
  return id;
}

status job_manager::load(const roster& nodes, time_point now) {
  if (!db_) return ok_status();
  auto loaded = db_->with_read_transaction([](store::transaction& tx) { return load_jobs(tx); });
  if (!loaded) return loaded.err();
  auto requests = db_->with_read_transaction([](store::transaction& tx) { return load_requests(tx); });
  if (!requests) return requests.err();
  tick(nodes, now);  // live trainers into the policy first, so running stages can be restored
  for (auto& r : *requests) by_request_[request_key(r.principal, r.request_id)] = r;
  for (auto& j : *loaded) {
    next_seq_ = std::max(next_seq_, j.seq + 1);
    // The submit's request record is the job row (from v7; job_requests held
    // it in v4-v6). A job from before v4: its request id was global, its key the bare id.
    const auto nl = j.request_id.find('\n');
    if (nl == std::string::npos)
      by_request_.try_emplace(request_key(j.principal, j.request_id),
                              request_rec{j.principal, j.request_id, "submit", "", j.id, j.submitted_ns});
    else
      by_request_.try_emplace(j.request_id, request_rec{j.request_id.substr(0, nl), j.request_id.substr(nl + 1),
                                                        "submit", j.body_sha256, j.id, j.submitted_ns});
    for (auto& s : j.stages)
      if (s.min_trainers == 0) {  // a row from before v4: its figures from the resolved spec, once
        auto spec = runspec::parse_run_config(s.config_toml, j.id + "/" + s.name);
        s.min_trainers = spec ? spec->min_trainers : 1;
        s.max_trainers = spec ? spec->max_trainers : 1;
        s.memory_bytes = spec ? spec->memory().total() : 0;
      }
    const std::string id = j.id;
    jobs_[id] = std::move(j);
  }
  for (auto& [id, j] : jobs_) {
    if (j.terminal()) continue;
    for (std::size_t i = 0; i < j.stages.size(); ++i) {
      stage_rec& s = j.stages[i];
      by_pid_[pid_of(j, i)] = {id, i};
      if (is_hpo(s) && (s.state == "running" || s.state == "queued")) {
        if (s.state == "queued") {
          start_search(j, i, now);
          continue;
        }
        // ASHA's state is in memory only: a search that was running does not
        // survive a restart (its trials' directories stay for inspection).
        s.state = "failed";
        s.finished_ns = ns(now);
        j.state = "failed";
        j.message = "stage " + s.name + ": the scheduler restarted during its hpo search (a search does not resume "
                    "yet); submit the job again";
        for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
        (void)record(j, s.name, "stage_failed", j.message, now);
        break;
      }
      if (s.state == "running" && is_site_stage(j, i)) {  // its members again; lost ones are re-placed by tick
        for (std::uint32_t r = 0; r < s.members.size(); ++r)
          if (node_ids_.count(s.members[r]) && in_policy_[s.members[r]]) slots_[s.members[r]] = {id, i, r, false, 0, false};
        (void)record(j, s.name, "reattached", "scheduler restarted; stage still on " + member_list(s.members), now, false);
        continue;
      }
      if (s.state == "running") {
        if (s.members.empty()) s.members = {s.node};  // a row from before groups (migration v3)
        std::vector<policy::node_id> held;
        std::vector<std::string> dead;
        for (const auto& m : s.members) {
          auto n = node_ids_.find(m);
          if (n != node_ids_.end() && in_policy_[m]) held.push_back(n->second);
          else dead.push_back(m);
        }
        if (dead.empty()) {
          auto d = policy_.restore_running(spec_of(j, i), held, ms(now), ms(now));
          if (d) {
            for (std::uint32_t r = 0; r < s.members.size(); ++r) slots_[s.members[r]] = {id, i, r, false, 0, false};
            (void)record(j, s.name, "reattached", "scheduler restarted; stage still on " + member_list(s.members), now, false);
            apply(*d, now);
            continue;
          }
        }
        s.state = "queued";
        clear_members(j, i);
        (void)record(j, s.name, "requeued",
                     "scheduler restarted; trainer " + (dead.empty() ? s.node : member_list(dead)) + " is not alive", now);
      }
      if (s.state == "queued") queue_stage(j, i, std::nullopt, now);
    }
  }
  return ok_status();
}

void job_manager::apply(const policy::policy::decisions& ds, time_point now) {
  for (const auto& d : ds) {
    if (auto t = trials_.find(d.job); t != trials_.end()) {  // an hpo trial's segment
      apply_trial(t->second, d.job, d, now);
      continue;
    }
    auto it = by_pid_.find(d.job);
    if (it == by_pid_.end()) continue;
    job_rec& j = jobs_.at(it->second.first);
    const std::size_t i = it->second.second;
    stage_rec& s = j.stages[i];
    if (j.terminal()) continue;  // failed earlier in this pass (fail_lost_stage): its later decisions are void
    if (d.what == policy::action::place && !d.nodes.empty()) {
      std::vector<std::string> members;
      for (auto n : d.nodes) members.push_back(node_names_.at(n));
      s.state = "running";
      ++s.attempts;
      if (s.started_ns == 0) s.started_ns = ns(now);
      j.state = "running";
      set_members(j, i, std::move(members));
      (void)record(j, s.name, "placed",
                   "on " + member_list(s.members) + " (attempt " + std::to_string(s.attempts) +
                       (s.members.size() > 1 ? ", a group of " + std::to_string(s.members.size()) + ")" : ")"),
                   now);
    } else if (d.what == policy::action::grow || d.what == policy::action::shrink) {
      std::vector<std::string> members = s.members, changed;
      for (auto n : d.nodes) {
        const std::string name = node_names_.at(n);
        changed.push_back(name);
        if (d.what == policy::action::grow) members.push_back(name);
        else members.erase(std::remove(members.begin(), members.end(), name), members.end());
      }
      set_members(j, i, std::move(members));
      (void)record(j, s.name, d.what == policy::action::grow ? "grew" : "shrank",
                   std::string(d.what == policy::action::grow ? "added " : "released ") + member_list(changed) + " (" +
                       policy::to_string(d.why) + "); " + std::to_string(s.members.size()) +
                       " trainers now, generation " + std::to_string(s.generation) + " from the latest checkpoint",
                   now);
    } else if (d.what == policy::action::requeue && d.why == policy::reason::node_lost &&
               ++s.node_losses >= max_node_losses) {
      fail_lost_stage(j, i, now);
    } else if (d.what == policy::action::preempt || d.what == policy::action::requeue) {
      clear_members(j, i);
      s.state = "queued";
      const std::string why = d.what == policy::action::preempt
                                  ? "preempted for a higher-priority job (checkpointed, resumes later)"
                                  : "trainer " + s.node + " lost; resumes from its latest checkpoint";
      (void)record(j, s.name, "requeued", why, now);
    }
  }
}

void job_manager::fail_lost_stage(job_rec& j, std::size_t i, time_point now) {
  stage_rec& s = j.stages[i];
  const std::string lost = s.node;
  clear_members(j, i);
  s.state = "failed";
  s.finished_ns = ns(now);
  j.state = "failed";
  j.message = "stage " + s.name + ": its trainer stopped answering " + std::to_string(s.node_losses) +
              " times while running it (last: " + lost + "); not placing it again unchanged — check " +
              "train.threads and train.batch against the node (estimated " +
              std::to_string(s.memory_bytes >> 20) + " MiB per trainer)";
  for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
  (void)record(j, s.name, "stage_failed", j.message, now);
  // The policy queued it again (and may have placed it in the same pass):
  // out of the policy, and what its room allows now.
  if (auto d = policy_.cancel(pid_of(j, i), ms(now))) apply(*d, now);
}

void job_manager::stage_done(job_rec& j, std::size_t i, bool ok, const std::string& message_in, time_point now,
                             const std::string& at_site) {
  stage_rec& s = j.stages[i];
  std::string message = message_in;
  if (ok && at_site.empty())
    if (auto problem = result_problem(j, i); !problem.empty()) {  // never a success the cloud cannot vouch for
      ok = false;
      message = problem;
    }
  s.state = ok ? "succeeded" : "failed";
  s.finished_ns = ns(now);
  const bool search = searches_.count(search_key(j.id, i)) > 0;  // an hpo stage: not in the policy itself
  if (search) {
    cancel_trials(j.id, now);
    searches_.erase(search_key(j.id, i));
  }
  take_slots(j, i);  // members stay on the stage: who ran it
  if (!ok) {
    j.state = "failed";
    j.message = "stage " + s.name + ": " + message;
    for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
  } else if (i + 1 == j.stages.size()) {
    j.state = "succeeded";
  }
  (void)record(j, s.name, ok ? "stage_succeeded" : "stage_failed",
               ok ? "step " + std::to_string(s.step) + ", loss " + std::to_string(s.loss) + ", checkpoint " + s.checkpoint +
                        (at_site.empty() ? ""
                                         : " at site " + at_site +
                                               " (verified there by its trainer; the cloud neither holds nor verified it)")
                  : message,
               now);
  if (ok && !at_site.empty()) {
    (void)record(j, s.name, "model_not_registered",
                 "its checkpoint is kept at site " + at_site +
                     ": the cloud registers only checkpoints it holds and verifies",
                 now, false);
  } else if (ok && on_succeeded_) {
    auto [kind, text] = on_succeeded_(j, i);
    if (!kind.empty()) (void)record(j, s.name, kind, text, now, false);
  }
  if (ok && i + 1 < j.stages.size()) {
    // The stage switch: the next stage takes this one's place in the queue, so
    // the trainer it frees goes to it before later arrivals of its class.
    j.stages[i + 1].state = "queued";
    (void)record(j, j.stages[i + 1].name, "queued",
                 "starts from " + s.name + "'s final checkpoint " + s.checkpoint, now);
    const bool outside = search || is_site_stage(j, i);  // an hpo or edge-site stage is not the policy's
    queue_stage(j, i + 1, outside ? std::nullopt : std::optional<policy::job_id>(pid_of(j, i)), now);
    return;
  }
  if (search || is_site_stage(j, i)) return;  // never in the policy
  auto d = policy_.finish(pid_of(j, i), ms(now));
  if (d) apply(*d, now);
}

void job_manager::queue_stage(job_rec& j, std::size_t i, std::optional<policy::job_id> after, time_point now) {
  if (is_hpo(j.stages[i]) || is_site_stage(j, i)) {  // not the policy's: the stage before leaves it
    if (after)
      if (auto d = policy_.finish(*after, ms(now))) apply(*d, now);
    if (is_hpo(j.stages[i])) start_search(j, i, now);  // an edge-site stage: place_site_stages, at the next tick
    return;
  }
  auto d = after ? policy_.finish_and_submit(*after, spec_of(j, i), ms(now)) : policy_.submit(spec_of(j, i), ms(now));
  if (d) apply(*d, now);
}

poll_answer job_manager::poll(const poll_report& r, time_point now) {
  poll_answer out;
  if (!r.peer_endpoint.empty()) peers_[r.node] = {r.node, r.peer_endpoint, r.peer_public_key};
  auto slot_it = slots_.find(r.node);
  if (slot_it == slots_.end() && readopt(r, now)) slot_it = slots_.find(r.node);
  const bool ends = (r.state == "succeeded" || r.state == "failed") && !r.job.empty();
  if (slot_it == slots_.end()) {
    out.stop = r.state == "running";  // cancelled or moved elsewhere: stop it
    if (ends) out.refused = "node " + r.node + " holds no stage: its report of " + r.job + "/" + r.stage + " (" + r.state + ") is not applied";
    return out;
  }
  slot& sl = slot_it->second;
  if (sl.trial != 0) return trial_poll(r, sl, now);
  job_rec& j = jobs_.at(sl.job);
  const std::size_t i = sl.stage;
  stage_rec& s = j.stages[i];
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
    out.work = assignment_of(j, i, sl.rank);
    return out;
  };
  // What the trainer noticed (rollbacks, snapshot fallbacks) becomes job
  // events, each once: a notice's seq is its creation time in ns.
  if (mine)
    for (const auto& n : r.notices) {
      if (n.seq <= sl.notices_acked) continue;
      (void)record(j, s.name, n.kind, (s.members.size() > 1 ? who + ": " : "") + n.text, now, false);
      sl.notices_acked = n.seq;
    }
  out.notices_acked = sl.notices_acked;
  if (mine && current && !r.site.site.empty()) {  // a diloco site's line for `loom job watch`
    auto same = [&](const site_line& x) { return x.site == r.site.site; };
    auto it = std::find_if(s.sites.begin(), s.sites.end(), same);
    if (it != s.sites.end()) {
      *it = r.site;
    } else {
      s.sites.push_back(r.site);
      std::sort(s.sites.begin(), s.sites.end(), [](const site_line& a, const site_line& b) { return a.site < b.site; });
    }
  }
  if (mine && r.state == "running") {
    if (!current) return deliver();  // the new formation: the trainer stops this one and starts it
    sl.delivered = true;
    sl.running_gen = s.generation;
    if (sl.rank != 0) return deliver();  // rank 0 speaks for the group
    const bool changed = r.step != s.step || r.checkpoint != s.checkpoint;
    s.step = r.step;
    s.loss = r.loss;
    s.tokens_per_s = r.tokens_per_s;
    if (r.first_loss != 0) s.first_loss = r.first_loss;
    if (r.total_steps) s.total_steps = r.total_steps;
    if (r.checkpoint != s.checkpoint && !r.checkpoint.empty()) {
      s.checkpoint = r.checkpoint;
      (void)record(j, s.name, "snapshot", r.checkpoint, now, false);
    }
    if (changed) (void)persist([snap = j, i](store::transaction& tx) { return save_stage(tx, snap, i); });
    return deliver();
  }
  if (mine && current && (r.state == "succeeded" || r.state == "failed") && (sl.rank == 0 || r.state == "failed")) {
    s.step = sl.rank == 0 ? r.step : s.step;
    s.loss = sl.rank == 0 ? r.loss : s.loss;
    if (sl.rank == 0 && r.first_loss != 0) s.first_loss = r.first_loss;
    if (sl.rank == 0 && r.tokens_per_s > 0) s.tokens_per_s = r.tokens_per_s;  // a short stage may end before a running poll
    if (sl.rank == 0 && !r.checkpoint.empty()) s.checkpoint = r.checkpoint;
    if (sl.rank == 0 && !r.contributed.empty()) {  // a diloco stage's end (aggregation_grant.hpp)
      s.contributed = r.contributed;
      s.missing = r.missing;
      if (!r.missing.empty())
        (void)record(j, s.name, "contributions",
                     "contributed: " + member_list(r.contributed) + "; never contributed: " + member_list(r.missing) +
                         " (diloco.min_sites allows it)",
                     now, false);
    }
    // A stage of a site's zone run by the site's own trainer keeps its result
    // at the site; an edge-site (diloco) stage's result is the cloud's export.
    const std::string at_site = is_site_stage(j, i) ? "" : r.caller_site;
    stage_done(j, i, r.state == "succeeded", sl.rank == 0 ? r.message : who + ": " + r.message, now, at_site);
    return out;  // no work: the next poll may bring the next stage
  }
  if (mine && current && r.state == "succeeded") {  // rank > 0 done: rank 0 ends the stage
    sl.finished = true;
    return out;
  }
  if (mine && current && r.state == "regroup") {
    if (++s.regroups > max_regroups) {
      stage_done(j, i, false,
                 "its group re-formed " + std::to_string(max_regroups) + " times; last: " + who + ": " + r.message, now);
      return out;
    }
    regroup(j, i, who + ": " + r.message, now);
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
      regroup(j, i, who + " restarted (attempt " + std::to_string(s.attempts) + ")", now);
    } else {
      (void)record(j, s.name, "resumed",
                   "trainer " + r.node + " restarted; resuming from the latest checkpoint (attempt " +
                       std::to_string(s.attempts) + ")",
                   now);
    }
  }
  return deliver();
}

void job_manager::tick(const roster& nodes, time_point now) {
  std::map<std::string, bool> alive, draining;
  for (const auto& [nid, n] : nodes.all()) {
    if (n.service != "trainer") continue;
    alive[n.id] = nodes.state(n, now) != node_state::dead;
    draining[n.id] = n.draining;
  }
  for (const auto& [id, live] : alive) {
    if (!live || in_policy_[id]) continue;
    auto idx = node_index(id);
    policy::node_spec spec{*idx, nodes.find(id)->zone, trainer_capacity(*nodes.find(id))};
    auto d = policy_.add_node(spec, ms(now));
    if (!d) continue;
    in_policy_[id] = true;
    cordoned_[id] = false;
    apply(*d, now);
  }
  // Drained trainers finish what they run and are given nothing new.
  for (const auto& [id, live] : alive) {
    const bool cordon = draining[id] || site_held(id);  // an edge-site stage's member: not the policy's to give
    if (!live || !in_policy_[id] || cordoned_[id] == cordon) continue;
    auto d = policy_.set_draining(node_ids_.at(id), cordon, ms(now));
    if (!d) continue;
    cordoned_[id] = cordon;
    apply(*d, now);
  }
  for (auto& [id, present] : in_policy_) {
    if (!present) continue;
    auto a = alive.find(id);
    if (a != alive.end() && a->second) continue;
    present = false;
    slots_.erase(id);
    auto d = policy_.remove_node(node_ids_.at(id), ms(now));
    if (d) apply(*d, now);
  }
  apply(policy_.tick(ms(now)), now);
  place_site_stages(nodes, now);
}


result<std::vector<job_event>> job_manager::events(const std::string& id, std::uint64_t after) const {
  if (!jobs_.count(id)) return make_error(errc::not_found, "no job " + id);
  if (!db_) return std::vector<job_event>{};
  return db_->with_read_transaction([&](store::transaction& tx) { return load_events(tx, id, after); });
}

}  // namespace loom::scheduler
