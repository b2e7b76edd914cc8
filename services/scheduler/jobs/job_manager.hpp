// job_manager: training jobs in the scheduler — submit (idempotent by request
// id), list, cancel, and the trainers' polls that deliver assignments and carry
// progress back. A thin dispatcher over three owners, one per kind of
// placement, each with its own state and handed the shared job table
// (jobs_context: jobs, store, events, the policy, trainer slots) per call:
//   policy_stages  ordinary stages, placed by the scheduling policy (policy/),
//                  one trainer or a group (its [parallel] gang size or elastic
//                  range; each member gets its rank and the group's peers, rank
//                  0 reports progress and the end, a group that changes gets a
//                  new generation and restarts from the latest snapshot);
//   hpo_stages     hpo stages: ASHA trial segments, each a one-trainer policy job;
//   site_stages    edge-site diloco stages, member r placed on a trainer of site r.
// The dispatcher owns what is common: the job table and request ids, load,
// submit and cancel, routing the policy's decisions and each poll to the
// owner of its slot, a stage's end (its result checked) and the next stage
// queued by its kind. Every change is written to the store before it is
// applied in memory; a restarted scheduler reloads jobs and re-attaches
// running stages to their trainers.
//
//   job:   queued ──▶ running ──▶ succeeded | failed | cancelled
//   stage: pending ─▶ queued ─(placed)─▶ running ─(trainer reports)─▶ succeeded ─▶ next stage queued
//                       ▲                   │ trainer lost / preempted
//                       └───────────────────┘          (resumes from its checkpoints)
//
// A trainer that restarts (kill -9, the watcher starts it again) polls `idle`
// while the scheduler still has its assignment: it gets the same stage again and
// resumes from the stage's latest verified snapshot.
// Owned by the scheduler actor; not thread-safe; no CAF, no ZeroMQ; clock passed in.
// Code: job_manager.cpp (load, routing, a stage's end, polls, ticks),
// job_requests.cpp (submit, cancel, views), stage_result.cpp (a result's
// check); policy_stages.{hpp,cpp} + job_groups.cpp, hpo_stage.{hpp,cpp},
// site_stages.{hpp,cpp}; jobs_context.{hpp,cpp}; trainer_poll.hpp (poll types).
#pragma once

#include "libs/files/confine.hpp"
#include "libs/runspec/job_template.hpp"
#include "libs/status/status.hpp"
#include "services/scheduler/dataset_probe.hpp"
#include "services/scheduler/jobs/admission.hpp"
#include "services/scheduler/jobs/hpo_stage.hpp"
#include "services/scheduler/jobs/job_store.hpp"
#include "services/scheduler/jobs/load_shedding.hpp"
#include "services/scheduler/jobs/jobs_context.hpp"
#include "services/scheduler/jobs/policy_stages.hpp"
#include "services/scheduler/jobs/site_stages.hpp"
#include "services/scheduler/jobs/trainer_poll.hpp"
#include "services/scheduler/policy/policy.hpp"
#include "services/scheduler/roster.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::store {
class database;
}

namespace loom::scheduler {

struct submit_args {
  std::string template_name, template_toml;
  std::vector<std::string> overrides;
  std::string priority_class, tenant, zone;
};

// Who calls (from the gateway's call context) and what: jobs belong to a
// tenant; operators and viewers act within their token's tenant, admins
// across. Request ids are per principal; body_sha256 tells a retry (same
// body) from a reuse of the id for something else (a conflict).
struct caller {
  std::string principal = "anonymous", role = "admin", tenant = "default";
  std::string request_id, body_sha256;
  std::string service_zone;  // the scheduler's own zone: always a known zone
  bool admin() const { return role == "admin"; }
};

// The cloud's judgement of a stage's final checkpoint (set_checkpoint_check):
// MANIFEST.json's HMAC under the checkpoint key at `key_path` (read at each
// call: the trainer makes it at its first snapshot) and the step its
// step-N directory names. Every file's hash is the trainer's to check (it
// hashed them as it wrote them); the model registry hashes them again.
std::function<status(const std::string& dir)> manifest_check(std::string key_path);

// Derives from jobs_context privately: the job table it shares with its
// placers is its own state (and a job_manager moves as one value).
class job_manager : private jobs_context {
 public:
  using unit = jobs_context::unit;
  using async_writer = jobs_context::async_writer;
  using event_sink = jobs_context::event_sink;

  // jobs_root: where stage directories go (<data dir>/jobs). db may be null (tests).
  // min_runtime: how long a stage runs before a higher-priority job may preempt
  // it (the guard against preemption loops).
  job_manager(store::database* db, std::string jobs_root,
              std::chrono::milliseconds min_runtime = default_min_runtime);
  static constexpr std::chrono::milliseconds default_min_runtime{60'000};
  // Limits of a placed stage's group (policy_stages.hpp says why).
  static constexpr std::uint32_t max_regroups = policy_stages::max_regroups;
  static constexpr std::uint32_t max_node_losses = policy_stages::max_node_losses;

  // The scheduler's own zone: a job that names no zone runs there, and so do
  // its hpo trials (never on an edge site's trainers). Set before load().
  void set_home_zone(std::string zone) { home_zone_ = std::move(zone); }
  // Loads every job and re-attaches running stages to the roster's live trainers.
  status load(const roster& nodes, time_point now);

  // invalid_argument for a bad template or override, or a job no trainer of
  // its zone could run (admission.hpp); not_found for an unknown zone;
  // permission_denied for another tenant without the admin role; the existing
  // job (existed = true) when the caller used its request id for this same
  // submit before, conflict when for something else. Nothing is stored on error.
  result<std::pair<const job_rec*, bool>> submit(const submit_args& a, const caller& who, const roster& nodes,
                                                 time_point now);
  // A retried cancel (same request id) answers the job as the first left it.
  result<const job_rec*> cancel(const std::string& id, const std::string& reason, const caller& who,
                                time_point now);
  poll_answer poll(const poll_report& r, time_point now);
  // Adds live trainers to the policy, removes dead ones (their stages are requeued).
  void tick(const roster& nodes, time_point now);

  // Jobs `who` may see (its tenant's; every job for an admin).
  std::vector<const job_rec*> list(const std::string& state, const caller& who) const;
  const job_rec* find(const std::string& id) const;
  // not_found (naming the tenant) for a job of another tenant.
  result<const job_rec*> find_for(const std::string& id, const caller& who) const;
  // Why stage `i` of `j` is queued and not running ("" unless queued).
  std::string waiting(const job_rec& j, std::size_t i, const roster& nodes, time_point now) const;
  result<std::vector<job_event>> events(const std::string& id, std::uint64_t after) const;
  // Called after each job event is stored (queued, placed, stage switches,
  // snapshots, requeues, completion, cancellation): the service audits them.
  void set_event_sink(event_sink fn) { sink_ = std::move(fn); }
  // Told of each stage that succeeded, after its state is set and before the
  // next stage is queued (the model registry keeps its final checkpoint);
  // returns the job event it makes of it (kind, text), kind "" for none.
  using stage_hook = std::function<std::pair<std::string, std::string>(const job_rec&, std::size_t)>;
  void set_stage_succeeded(stage_hook fn) { on_succeeded_ = std::move(fn); }
  // Writes go to `w` instead of a transaction of their own: it queues the unit
  // (which owns copies of what it writes) for a group commit and the caller
  // answers once that is durable (scheduler_logic). Without one, every change
  // commits before the call returns.
  void set_async_writer(async_writer w) { writer_ = std::move(w); }
  // Asked at submit for every dataset a stage names (dataset_probe.hpp); a
  // job is stored only when each is ready. Unset: datasets are not checked.
  void set_dataset_probe(dataset_probe p) { probe_ = std::move(p); }
  // The only places a stage may read files from (layout::job_read_roots):
  // a path a stage names outside them is refused at submit
  // (permission_denied, naming the path and the roots). Unset: not checked.
  void set_read_roots(std::vector<std::string> roots) { read_roots_ = files::root_set(std::move(roots)); }
  // Checks a stage's final checkpoint directory before the stage may
  // succeed (the scheduler: MANIFEST.json's HMAC under the cloud's checkpoint
  // key; every file's hash is the trainer's to check). With one set, a stage
  // succeeds only with a checkpoint under its own stage directory that
  // passes; else it fails naming why. A result kept at an edge site (a stage
  // of a site's zone run by its trainer) is not the cloud's to verify: it
  // succeeds saying so, and no model version is registered for it.
  // Unset: not checked (tests).
  using checkpoint_check = std::function<status(const std::string& dir)>;
  void set_checkpoint_check(checkpoint_check c) { check_ = std::move(c); }
  // The edge sites by name with their state (pending, enrolled, revoked): a
  // diloco stage may name only enrolled ones (refused at submit naming the
  // site and the enrolled ones). Unset: not checked (tests).
  using site_states = site_stages::site_states;
  void set_site_states(site_states fn) { sites_.set_site_states(std::move(fn)); }
  // Site `site` was revoked: every job whose queued or running edge-site
  // stage names it fails, naming the site (its trainers are released: their
  // next poll is told to stop); a later stage naming it fails when queued.
  void site_revoked(const std::string& site, const std::string& reason, time_point now);
  // Trainer `node` registered again, the same process, after `silent` with
  // no answer and its own loop at most `late` behind: a loss of it in that
  // silence is taken back when it ran on time (policy_stages::cut_off).
  void cut_off(const std::string& node, std::chrono::milliseconds silent, std::chrono::milliseconds late,
               time_point now) {
    stages_.cut_off(*this, node, silent, late, now);
  }
  // The cloud's token key: signs the aggregation grant of each diloco stage's
  // assignment (aggregation_grant.hpp). Unset: none, and no aggregation starts.
  void set_grant_key(std::string key) { grant_key_ = std::move(key); }

 private:
  // The dispatcher's routing (jobs_context): a decision about a trial
  // segment goes to hpo_stages, one about a stage to policy_stages.
  void apply(const policy::policy::decisions& ds, time_point now) override;
  // A stage's end: its result checked (result_problem), its trainers
  // released, the job's state, the next stage queued by its kind.
  void stage_done(job_rec& j, std::size_t stage, bool ok, const std::string& message, time_point now,
                  const std::string& at_site = "") override;
  // Why stage i's final checkpoint may not be its result ("" when it may): check_.
  std::string result_problem(const job_rec& j, std::size_t i) const;
  // Stage i is queued: into the policy (policy_stages), or its search starts
  // (hpo_stages), or site_stages places it at the next tick. `after` (a
  // stage that just finished, in the policy) hands its queue place over.
  void queue_stage(job_rec& j, std::size_t i, std::optional<policy::job_id> after, time_point now);
  // load(): a job left with no stage queued or running, its next stage
  // pending after succeeded ones — a stage switch the store lost (written by
  // a version that stored it in two units) — has that stage queued now.
  void requeue_lost_switch(job_rec& j, time_point now);
  // Load shedding: pauses the stage load_shedding says is due (tick()).
  void relieve(time_point now);
  std::optional<policy::node_id> node_index(const std::string& node);
  std::vector<trainer_view> trainers(const roster& nodes, time_point now) const;
  static std::string request_key(const std::string& principal, const std::string& request_id);
  // A request id seen before from this principal: the job it made or
  // cancelled; conflict when it came with another request.
  result<const request_rec*> seen_request(const caller& who, const std::string& kind) const;

  policy_stages stages_;
  hpo_stages hpo_;
  site_stages sites_;
  load_shedding shedding_;
  std::map<std::string, request_rec> by_request_;          // principal + '\n' + request id
  std::uint64_t next_seq_ = 1;
  stage_hook on_succeeded_;
  dataset_probe probe_;
  files::root_set read_roots_;
  checkpoint_check check_;
  runspec::template_cache templates_;  // parsed template texts, reused across submits
};

}  // namespace loom::scheduler
