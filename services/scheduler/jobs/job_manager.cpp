#include "services/scheduler/jobs/job_manager.hpp"

#include "libs/store/database.hpp"
#include "services/scheduler/jobs/job_template.hpp"

#include <algorithm>
#include <cstdio>
#include <tuple>

namespace loom::scheduler {
namespace {

std::int64_t ns(time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// Each trainer node is one slot: a stage takes a whole trainer.
const policy::resources one_slot{0, 1, 0};

std::string job_id_of(std::uint64_t seq) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "job-%06llu", static_cast<unsigned long long>(seq));
  return buf;
}

}  // namespace

job_manager::job_manager(store::database* db, std::string jobs_root, std::chrono::milliseconds min_runtime)
    : db_(db), root_(std::move(jobs_root)), min_runtime_(min_runtime) {}

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
  s.priority = priority_of(j.priority_class);
  if (!j.zone.empty()) s.zones = {j.zone};
  s.per_member = one_slot;
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
  tick(nodes, now);  // live trainers into the policy first, so running stages can be restored
  for (auto& j : *loaded) {
    next_seq_ = std::max(next_seq_, j.seq + 1);
    by_request_[j.request_id] = j.id;
    const std::string id = j.id;
    jobs_[id] = std::move(j);
  }
  for (auto& [id, j] : jobs_) {
    if (j.terminal()) continue;
    for (std::size_t i = 0; i < j.stages.size(); ++i) {
      stage_rec& s = j.stages[i];
      by_pid_[pid_of(j, i)] = {id, i};
      if (auto range = trainers_of(s.config_toml)) std::tie(s.min_trainers, s.max_trainers) = *range;
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
      if (s.state == "queued") {
        auto d = policy_.submit(spec_of(j, i), ms(now));
        if (d) apply(*d, now);
      }
    }
  }
  return ok_status();
}

result<std::pair<const job_rec*, bool>> job_manager::submit(const submit_args& a, const std::string& request_id,
                                                            const std::string& principal, time_point now) {
  if (request_id.empty()) return make_error(errc::invalid_argument, "SubmitJob: the request id is empty");
  if (auto it = by_request_.find(request_id); it != by_request_.end())
    return std::pair<const job_rec*, bool>{&jobs_.at(it->second), true};
  if (a.template_toml.empty()) return make_error(errc::invalid_argument, "SubmitJob: the template text is empty");
  auto plan = resolve_template(a.template_name, a.template_toml, a.overrides);
  if (!plan) return plan.err();
  job_rec j;
  j.seq = next_seq_;
  j.id = job_id_of(j.seq);
  j.request_id = request_id;
  j.name = plan->name;
  j.template_name = a.template_name;
  j.priority_class = a.priority_class.empty() ? plan->priority_class : a.priority_class;
  if (priority_of(j.priority_class) < 0)
    return make_error(errc::invalid_argument, "priority class " + j.priority_class + ": use low, normal or high");
  j.tenant = a.tenant.empty() ? principal : a.tenant;
  j.zone = a.zone;
  j.principal = principal;
  j.out_dir = root_ + "/" + j.id;
  j.overrides = a.overrides;
  j.submitted_ns = j.updated_ns = ns(now);
  for (const auto& sp : plan->stages) {
    stage_rec s;
    s.name = sp.name;
    s.config_toml = sp.config_toml;
    s.total_steps = sp.total_steps;
    s.min_trainers = sp.min_trainers;
    s.max_trainers = sp.max_trainers;
    j.stages.push_back(std::move(s));
  }
  j.stages[0].state = "queued";
  std::string names;
  for (const auto& s : j.stages) names += (names.empty() ? "" : " -> ") + s.name;
  auto st = persist([j, e = job_event{1, ns(now), "", "submitted",
                                       "template " + a.template_name + ", stages " + names + ", by " + principal}](
                        store::transaction& tx) -> status {
    if (auto s = save_job(tx, j); !s) return s;
    return add_event(tx, j.id, e);
  });
  if (!st) return st.err();
  j.next_event = 2;
  ++next_seq_;
  const std::string id = j.id;
  by_request_[request_id] = id;
  job_rec& stored = jobs_[id] = std::move(j);
  for (std::size_t i = 0; i < stored.stages.size(); ++i) by_pid_[pid_of(stored, i)] = {id, i};
  auto d = policy_.submit(spec_of(stored, 0), ms(now));
  if (d) apply(*d, now);
  return std::pair<const job_rec*, bool>{&stored, false};
}

void job_manager::apply(const policy::policy::decisions& ds, time_point now) {
  for (const auto& d : ds) {
    auto it = by_pid_.find(d.job);
    if (it == by_pid_.end()) continue;
    job_rec& j = jobs_.at(it->second.first);
    const std::size_t i = it->second.second;
    stage_rec& s = j.stages[i];
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

void job_manager::stage_done(job_rec& j, std::size_t i, bool ok, const std::string& message, time_point now) {
  stage_rec& s = j.stages[i];
  s.state = ok ? "succeeded" : "failed";
  s.finished_ns = ns(now);
  take_slots(j, i);  // members stay on the stage: who ran it
  if (!ok) {
    j.state = "failed";
    j.message = "stage " + s.name + ": " + message;
    for (std::size_t k = i + 1; k < j.stages.size(); ++k) j.stages[k].state = "cancelled";
  } else if (i + 1 == j.stages.size()) {
    j.state = "succeeded";
  }
  (void)record(j, s.name, ok ? "stage_succeeded" : "stage_failed",
               ok ? "step " + std::to_string(s.step) + ", loss " + std::to_string(s.loss) + ", checkpoint " + s.checkpoint
                  : message,
               now);
  if (ok && i + 1 < j.stages.size()) {
    // The stage switch: the next stage takes this one's place in the queue, so
    // the trainer it frees goes to it before later arrivals of its class.
    j.stages[i + 1].state = "queued";
    (void)record(j, j.stages[i + 1].name, "queued",
                 "starts from " + s.name + "'s final checkpoint " + s.checkpoint, now);
    auto d = policy_.finish_and_submit(pid_of(j, i), spec_of(j, i + 1), ms(now));
    if (d) apply(*d, now);
    return;
  }
  auto d = policy_.finish(pid_of(j, i), ms(now));
  if (d) apply(*d, now);
}

result<const job_rec*> job_manager::cancel(const std::string& id, const std::string& reason, time_point now) {
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return make_error(errc::not_found, "no job " + id);
  job_rec& j = it->second;
  if (j.terminal()) return make_error(errc::conflict, "job " + id + " is already " + j.state);
  for (std::size_t i = 0; i < j.stages.size(); ++i) {
    stage_rec& s = j.stages[i];
    if (s.state == "running" || s.state == "queued") {
      clear_members(j, i);  // the trainers' next polls are told to stop
      (void)policy_.cancel(pid_of(j, i), ms(now));
    }
    if (s.state != "succeeded" && s.state != "failed") s.state = "cancelled";
  }
  j.state = "cancelled";
  j.message = reason.empty() ? "cancelled" : reason;
  if (auto st = record(j, "", "cancelled", j.message, now); !st) return st.err();
  apply(policy_.tick(ms(now)), now);
  return &j;
}

poll_answer job_manager::poll(const poll_report& r, time_point now) {
  poll_answer out;
  if (!r.peer_endpoint.empty()) peers_[r.node] = {r.node, r.peer_endpoint, r.peer_public_key};
  auto slot_it = slots_.find(r.node);
  if (slot_it == slots_.end()) {
    out.stop = r.state == "running";  // cancelled or moved elsewhere: stop it
    return out;
  }
  slot& sl = slot_it->second;
  job_rec& j = jobs_.at(sl.job);
  const std::size_t i = sl.stage;
  stage_rec& s = j.stages[i];
  const bool mine = r.job == j.id && r.stage == s.name;
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
    if (sl.rank == 0 && !r.checkpoint.empty()) s.checkpoint = r.checkpoint;
    stage_done(j, i, r.state == "succeeded", sl.rank == 0 ? r.message : who + ": " + r.message, now);
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
  for (const auto& n : nodes.list()) {
    if (n.service != "trainer") continue;
    alive[n.id] = nodes.state(n, now) != node_state::dead;
    draining[n.id] = n.draining;
  }
  for (const auto& [id, live] : alive) {
    if (!live || in_policy_[id]) continue;
    auto idx = node_index(id);
    policy::node_spec spec{*idx, nodes.find(id)->zone, one_slot};
    auto d = policy_.add_node(spec, ms(now));
    if (!d) continue;
    in_policy_[id] = true;
    cordoned_[id] = false;
    apply(*d, now);
  }
  // Drained trainers finish what they run and are given nothing new.
  for (const auto& [id, live] : alive) {
    if (!live || !in_policy_[id] || cordoned_[id] == draining[id]) continue;
    auto d = policy_.set_draining(node_ids_.at(id), draining[id], ms(now));
    if (!d) continue;
    cordoned_[id] = draining[id];
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
}

std::vector<const job_rec*> job_manager::list(const std::string& state) const {
  std::vector<const job_rec*> out;
  for (const auto& [id, j] : jobs_)
    if (state.empty() || j.state == state) out.push_back(&j);
  return out;
}

const job_rec* job_manager::find(const std::string& id) const {
  auto it = jobs_.find(id);
  return it == jobs_.end() ? nullptr : &it->second;
}

result<std::vector<job_event>> job_manager::events(const std::string& id, std::uint64_t after) const {
  if (!jobs_.count(id)) return make_error(errc::not_found, "no job " + id);
  if (!db_) return std::vector<job_event>{};
  return db_->with_read_transaction([&](store::transaction& tx) { return load_events(tx, id, after); });
}

}  // namespace loom::scheduler
