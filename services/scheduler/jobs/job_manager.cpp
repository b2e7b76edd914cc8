// job_manager, the dispatcher (job_manager.hpp): loading jobs back, routing
// the policy's decisions and each trainer's poll to the owner of its kind of
// stage, a stage's end and the next stage's queueing, and the tick that feeds
// the roster's trainers to the policy.
#include "services/scheduler/jobs/job_manager.hpp"

#include "libs/runspec/job_template.hpp"
#include "libs/store/database.hpp"

#include <algorithm>

namespace loom::scheduler {
namespace {

// Each trainer node is one slot (a stage takes a whole trainer), with the
// memory a stage may plan for there (admission.hpp: usable_memory).
policy::resources trainer_capacity(const node& n) { return {0, 1, usable_memory(n.resources.memory_bytes)}; }

}  // namespace

job_manager::job_manager(store::database* db, std::string jobs_root, std::chrono::milliseconds min_runtime)
    : jobs_context(db, std::move(jobs_root), min_runtime) {}

std::string job_manager::request_key(const std::string& principal, const std::string& request_id) {
  return principal + "\n" + request_id;
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
      if (hpo_stages::is_hpo(s) && (s.state == "running" || s.state == "queued")) {
        if (hpo_.reload(*this, j, i, now)) break;  // a search that was running failed the job
        continue;
      }
      if (s.state == "running" && sites_.is_site_stage(j, i)) {  // its members again; lost ones are re-placed by tick
        sites_.reattach(*this, j, i, now);
        continue;
      }
      if (s.state == "running" && stages_.reload(*this, j, i, now)) continue;
      if (s.state == "queued") queue_stage(j, i, std::nullopt, now);
    }
    if (!j.terminal()) requeue_lost_switch(j, now);
  }
  return ok_status();
}

void job_manager::requeue_lost_switch(job_rec& j, time_point now) {
  std::size_t next = 0;
  for (; next < j.stages.size(); ++next) {
    const std::string& st = j.stages[next].state;
    if (st == "queued" || st == "running") return;  // the job goes on
    if (st != "succeeded") break;
  }
  if (next == j.stages.size() || j.stages[next].state != "pending") return;
  stage_rec& s = j.stages[next];
  s.state = "queued";
  (void)record(j, s.name, "queued",
               next == 0 ? std::string("the scheduler restarted with no stage of this job queued")
                         : "starts from " + j.stages[next - 1].name + "'s final checkpoint " +
                               j.stages[next - 1].checkpoint + " (the stage switch was lost in a failed store write)",
               now);
  queue_stage(j, next, std::nullopt, now);
}

void job_manager::apply(const policy::policy::decisions& ds, time_point now) {
  for (const auto& d : ds) {
    if (hpo_.owns(d.job)) {  // an hpo trial's segment
      hpo_.apply(*this, d, now);
      continue;
    }
    auto it = by_pid_.find(d.job);
    if (it == by_pid_.end()) continue;
    job_rec& j = jobs_.at(it->second.first);
    if (j.terminal()) continue;  // failed earlier in this pass (a lost stage): its later decisions are void
    stages_.apply(*this, d, j, it->second.second, now);
  }
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
  // The switch is stored with the stage's end, in one unit: a store that
  // fails between two writes never leaves the job with no stage to run.
  if (ok && i + 1 < j.stages.size()) j.stages[i + 1].state = "queued";
  const bool search = hpo_.stop(*this, j.id, i, now);  // an hpo stage: not in the policy itself
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
  const bool outside = search || sites_.is_site_stage(j, i);  // an hpo or edge-site stage is not the policy's
  if (ok && i + 1 < j.stages.size()) {
    // The stage switch: the next stage takes this one's place in the queue, so
    // the trainer it frees goes to it before later arrivals of its class.
    j.stages[i + 1].state = "queued";
    (void)record(j, j.stages[i + 1].name, "queued",
                 "starts from " + s.name + "'s final checkpoint " + s.checkpoint, now);
    queue_stage(j, i + 1, outside ? std::nullopt : std::optional<policy::job_id>(pid_of(j, i)), now);
    return;
  }
  if (outside) return;  // never in the policy
  auto d = policy_.finish(pid_of(j, i), ms(now));
  if (d) apply(*d, now);
}

void job_manager::queue_stage(job_rec& j, std::size_t i, std::optional<policy::job_id> after, time_point now) {
  const bool hpo = hpo_stages::is_hpo(j.stages[i]);
  if (hpo || sites_.is_site_stage(j, i)) {  // not the policy's: the stage before leaves it
    if (after)
      if (auto d = policy_.finish(*after, ms(now))) apply(*d, now);
    if (hpo) hpo_.start(*this, j, i, now);  // an edge-site stage: site_stages places it, at the next tick
    return;
  }
  stages_.queue(*this, j, i, after, now);
}

poll_answer job_manager::poll(const poll_report& r, time_point now) {
  poll_answer out;
  stages_.heard(r);
  shedding_.heard(r.node, r.pressure_level, r.pressure_why);
  auto slot_it = slots_.find(r.node);
  if (slot_it == slots_.end() && sites_.readopt(*this, r, now)) slot_it = slots_.find(r.node);
  const bool ends = (r.state == "succeeded" || r.state == "failed") && !r.job.empty();
  if (slot_it == slots_.end()) {
    out.stop = r.state == "running";  // cancelled or moved elsewhere: stop it
    if (ends) out.refused = "node " + r.node + " holds no stage: its report of " + r.job + "/" + r.stage + " (" + r.state + ") is not applied";
    return out;
  }
  slot& sl = slot_it->second;
  if (sl.trial != 0) return hpo_.poll(*this, r, sl, now);
  return stages_.poll(*this, r, sl, sites_.is_site_stage(jobs_.at(sl.job), sl.stage), now);
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
  // Drained trainers finish what they run and are given nothing new; so do
  // trainers under sustained pressure, until they report ok (load_shedding.hpp).
  for (const auto& [id, live] : alive) {
    const bool cordon = draining[id] || sites_.held(*this, id) ||  // an edge-site stage's member: not the policy's to give
                        shedding_.closed(id);
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
    shedding_.forget(id);
    auto d = policy_.remove_node(node_ids_.at(id), ms(now));
    if (d) apply(*d, now);
  }
  relieve(now);
  apply(policy_.tick(ms(now)), now);
  sites_.place(*this, nodes, now);
}

void job_manager::relieve(time_point now) {
  auto ours = [this](const slot& sl) { return sl.trial == 0 && !sites_.is_site_stage(jobs_.at(sl.job), sl.stage); };
  auto p = shedding_.due(*this, ours, now);
  if (!p) return;
  auto d = policy_.pause(p->pid, ms(now));
  if (!d) return;  // not running in the policy after all: nothing to pause
  pausing_ = p->why;
  apply(*d, now);
  pausing_.clear();
}

result<std::vector<job_event>> job_manager::events(const std::string& id, std::uint64_t after) const {
  if (!jobs_.count(id)) return make_error(errc::not_found, "no job " + id);
  if (!db_) return std::vector<job_event>{};
  return db_->with_read_transaction([&](store::transaction& tx) { return load_events(tx, id, after); });
}

}  // namespace loom::scheduler
