// job_manager: training jobs in the scheduler — submit (idempotent by request
// id), list, cancel, and the trainers' polls that deliver assignments and carry
// progress back; placement by the scheduling policy (policy/), one stage of a
// job at a time, each trainer node one slot. A stage may span a group of
// trainers (its [parallel] gang size or elastic range): each member gets the
// same stage with its rank and the group's peers; rank 0 reports progress and
// the end. A group that changes (a member restarted, asked to regroup, or the
// elastic group grew or shrank) gets a new generation and every member
// restarts from the stage's latest snapshot. Every change is written to the
// store before it is applied in memory; a restarted scheduler reloads jobs and
// re-attaches running stages to their trainers (policy::restore_running).
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
// Code: job_manager.cpp (load, placement, polls, ticks), job_requests.cpp
// (submit, cancel, views), job_groups.cpp (trainer groups), hpo_stage.cpp
// (hpo stages: ASHA trial segments placed like one-trainer stages of the job's zone).
#pragma once

#include "libs/files/confine.hpp"
#include "libs/runspec/job_template.hpp"
#include "libs/status/status.hpp"
#include "services/scheduler/jobs/admission.hpp"
#include "services/scheduler/jobs/hpo_search.hpp"
#include "services/scheduler/dataset_probe.hpp"
#include "services/scheduler/jobs/job_store.hpp"
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

struct peer_info {
  std::string node, endpoint, public_key;  // a member's collective inbox
};

struct assignment {
  std::string job, stage, config_toml, out_dir, init_from;
  std::uint32_t attempt = 0;
  std::uint32_t rank = 0, world = 1;
  std::uint64_t generation = 0;
  std::vector<peer_info> peers;  // by rank; empty for a group of one
  std::uint64_t stop_at = 0;     // an hpo trial's segment: train to this step, score, end (0: none)
  std::string eval_text;         // its held-out text ("" = the tail of data.text)
  std::string tenant;            // the job's (TrainerStatus shows the job to it and admins only; whose data.dataset the trainer fetches)
  std::string aggregation_grant; // a diloco stage: its grant, serialized (aggregation_grant.hpp)
};

// What a trainer reports in each poll.
struct poll_report {
  std::string node, state;  // idle, running, succeeded, failed, stopped, regroup
  std::string job, stage;
  std::uint32_t attempt = 0;
  std::uint64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0, tokens_per_s = 0;
  std::string checkpoint, message;
  std::uint64_t generation = 0;             // the group formation it runs (0: none said)
  std::string peer_endpoint, peer_public_key;  // its collective inbox
  struct notice {
    std::uint64_t seq = 0;
    std::string kind, text;
  };
  std::vector<notice> notices;  // rollbacks, snapshot fallbacks: job events
  double val_loss = 0;          // an hpo trial's validation loss at val_step (0: none)
  std::uint64_t val_step = 0;
  site_line site;               // a diloco stage's site (site.site empty otherwise)
  // The edge site whose key sent the poll ("" for this deployment's own
  // trainers): set by the scheduler from the connection, never by the trainer.
  std::string caller_site;
  std::vector<std::string> contributed, missing;  // a diloco stage's member 0 at its end (aggregator's word)
};

struct poll_answer {
  std::optional<assignment> work;
  bool stop = false;
  std::uint64_t notices_acked = 0;
  // The report's end of a stage was not applied: the node does not hold
  // that job/stage/attempt. Why, naming them ("" when applied or none).
  std::string refused;
};

// The cloud's judgement of a stage's final checkpoint (set_checkpoint_check):
// MANIFEST.json's HMAC under the checkpoint key at `key_path` (read at each
// call: the trainer makes it at its first snapshot) and the step its
// step-N directory names. Every file's hash is the trainer's to check (it
// hashed them as it wrote them); the model registry hashes them again.
std::function<status(const std::string& dir)> manifest_check(std::string key_path);

class job_manager {
 public:
  // jobs_root: where stage directories go (<data dir>/jobs). db may be null (tests).
  // min_runtime: how long a stage runs before a higher-priority job may preempt
  // it (the guard against preemption loops).
  job_manager(store::database* db, std::string jobs_root,
              std::chrono::milliseconds min_runtime = default_min_runtime);
  static constexpr std::chrono::milliseconds default_min_runtime{60'000};
  // A stage whose group asked to re-form more often than this fails (a member
  // that cannot keep up, or a peer that cannot be reached, should not loop forever).
  static constexpr std::uint32_t max_regroups = 20;
  // A stage whose trainer stopped answering this often while running it fails:
  // a stage that makes its node unresponsive (threads, memory) would otherwise
  // take down every trainer it is placed on, one after the other.
  static constexpr std::uint32_t max_node_losses = 2;

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
  using event_sink = std::function<void(const job_rec&, const job_event&)>;
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
  using unit = std::function<status(store::transaction&)>;
  using async_writer = std::function<void(unit)>;
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
  using site_states = std::function<result<std::map<std::string, std::string>>()>;
  void set_site_states(site_states fn) { site_states_ = std::move(fn); }
  // Site `site` was revoked: every job whose queued or running edge-site
  // stage names it fails, naming the site (its trainers are released: their
  // next poll is told to stop); a later stage naming it fails when queued.
  void site_revoked(const std::string& site, const std::string& reason, time_point now);
  // The cloud's token key: signs the aggregation grant of each diloco stage's
  // assignment (aggregation_grant.hpp). Unset: none, and no aggregation starts.
  void set_grant_key(std::string key) { grant_key_ = std::move(key); }

 private:
  struct slot {  // what a trainer node runs
    std::string job;
    std::size_t stage = 0;
    std::uint32_t rank = 0;          // its place in the stage's group
    bool delivered = false;          // the trainer has reported running it
    std::uint64_t running_gen = 0;   // the generation it reported running
    bool finished = false;           // rank > 0 finished its part; rank 0 ends the stage
    std::uint64_t notices_acked = 0; // the trainer's notices recorded as job events
    policy::job_id trial = 0;        // an hpo trial's segment (trials_), 0: a stage
  };
  // An hpo stage's search (hpo_stage.cpp): ASHA's state and each trial's last checkpoint.
  struct search_state {
    hpo_search search;
    std::vector<std::string> checkpoints;  // by trial: its last snapshot
    std::vector<std::string> nodes;        // by trial: the trainer of its last segment
  };
  // One trial segment in the policy: a one-trainer job of its own, in the job's zone.
  struct trial_run {
    std::string job;
    std::size_t stage = 0;
    hpo_segment seg;
    std::string node;     // while placed
    std::uint32_t attempts = 0;
  };

  // Runs `fn` in a transaction now, or queues it with the async writer (then ok).
  status persist(unit fn) const;
  status record(job_rec& j, const std::string& stage, const std::string& kind, const std::string& text,
                time_point now, bool save_whole = true);
  policy::job_spec spec_of(const job_rec& j, std::size_t stage) const;
  policy::job_id pid_of(const job_rec& j, std::size_t stage) const { return j.seq * 64 + stage; }
  void apply(const policy::policy::decisions& ds, time_point now);
  // `at_site`: the stage's result is kept at that edge site (its trainer's checkpoint), not the cloud's.
  void stage_done(job_rec& j, std::size_t stage, bool ok, const std::string& message, time_point now,
                  const std::string& at_site = "");
  // Why stage i's final checkpoint may not be its result ("" when it may): check_.
  std::string result_problem(const job_rec& j, std::size_t i) const;
  const std::string& zone_of(const job_rec& j) const { return j.zone.empty() ? home_zone_ : j.zone; }
  // A queued or running edge-site stage that names a revoked site fails (site_stages.cpp).
  bool fail_if_revoked(job_rec& j, std::size_t i, time_point now);
  // A diloco stage's sites at submit: each must be enrolled.
  status check_sites(const runspec::job_plan& plan) const;
  // nullopt while a member of a group has not said where its inbox is.
  std::optional<assignment> assignment_of(const job_rec& j, std::size_t stage, std::uint32_t rank) const;
  // Group bookkeeping (job_groups.cpp): slots follow the stage's members.
  // Removes the stage's slots (every member's) and returns them by node.
  std::map<std::string, slot> take_slots(const job_rec& j, std::size_t stage);
  void set_members(job_rec& j, std::size_t stage, std::vector<std::string> members);
  void clear_members(job_rec& j, std::size_t stage);
  void regroup(job_rec& j, std::size_t stage, const std::string& why, time_point now);
  static std::string member_list(const std::vector<std::string>& nodes);  // "a, b, c"
  std::optional<policy::node_id> node_index(const std::string& node);
  policy::time_ms ms(time_point t) const;
  std::vector<trainer_view> trainers(const roster& nodes, time_point now) const;
  static std::int64_t ns(time_point t);
  static std::string request_key(const std::string& principal, const std::string& request_id);
  // A request id seen before from this principal: the job it made or
  // cancelled; conflict when it came with another request.
  result<const request_rec*> seen_request(const caller& who, const std::string& kind) const;
  void fail_lost_stage(job_rec& j, std::size_t i, time_point now);
  // Stage i is queued: into the policy, or (an hpo stage) its search starts,
  // or (an edge-site stage) place_site_stages places it at the next tick.
  // `after` (a stage that just finished, non-hpo) hands its queue place over.
  void queue_stage(job_rec& j, std::size_t i, std::optional<policy::job_id> after, time_point now);
  // hpo stages (hpo_stage.cpp).
  static bool is_hpo(const stage_rec& s);
  static std::string search_key(const std::string& job, std::size_t stage);
  void start_search(job_rec& j, std::size_t i, time_point now);
  void fill_search(job_rec& j, std::size_t i, time_point now);  // queue segments while ASHA has some
  void queue_segment(job_rec& j, std::size_t i, const hpo_segment& seg, time_point now);
  void apply_trial(trial_run& t, policy::job_id pid, const policy::decision& d, time_point now);
  poll_answer trial_poll(const poll_report& r, slot& sl, time_point now);
  // A segment's end: ASHA decides; a promoted trial's next segment goes back
  // to the same trainer in this reply, else whatever the freed trainer got.
  poll_answer trial_ended(policy::job_id pid, const poll_report& r, time_point now);
  void end_search(job_rec& j, std::size_t i, time_point now);
  // Removes trials' directories (<out>/<stage>/trial-N) under this scheduler's jobs dir: an hpo_removed event.
  void remove_trials(job_rec& j, std::size_t i, const std::vector<int>& trials, const std::string& why,
                     time_point now);
  void cancel_trials(const std::string& job, time_point now);  // frees their trainers (stop at the next poll)
  std::string trial_stage(const job_rec& j, const trial_run& t) const;  // "search.t3": what the trainer runs
  assignment trial_assignment(const job_rec& j, const trial_run& t) const;
  // The directory of stage i's final checkpoints (an hpo stage: its best trial's).
  std::string checkpoints_of(const job_rec& j, std::size_t i) const;
  // Edge-site stages (site_stages.cpp): a diloco stage naming sites, placed
  // here member by member in each site's zone rather than by the policy.
  const std::vector<std::string>& site_zones(const job_rec& j, std::size_t stage) const;  // empty: not one
  bool is_site_stage(const job_rec& j, std::size_t stage) const { return !site_zones(j, stage).empty(); }
  bool site_held(const std::string& node) const;  // runs a member of an edge-site stage
  std::string free_trainer(const roster& nodes, const std::string& zone, const std::string& prefer,
                           time_point now) const;
  void hold(const std::string& node, const std::string& job, std::size_t stage, std::uint32_t rank, time_point now);
  void place_site_stages(const roster& nodes, time_point now);
  // A trainer running its member of an edge-site stage that has no slot here
  // (the scheduler restarted): its slot again, as running. False: not one.
  bool readopt(const poll_report& r, time_point now);

  store::database* db_;
  std::string root_;
  std::chrono::milliseconds min_runtime_;
  policy::policy policy_;
  std::map<std::string, job_rec> jobs_;                    // by id
  std::map<std::string, request_rec> by_request_;          // principal + '\n' + request id
  std::map<policy::job_id, std::pair<std::string, std::size_t>> by_pid_;
  std::map<std::string, policy::node_id> node_ids_;        // trainer node -> policy node
  std::map<policy::node_id, std::string> node_names_;
  std::map<std::string, bool> in_policy_;                  // node -> added (and alive) in the policy
  std::map<std::string, bool> cordoned_;                   // node -> draining in the policy
  std::map<std::string, slot> slots_;                      // node -> its assignment
  std::map<std::string, peer_info> peers_;                 // node -> its collective inbox (from polls)
  std::map<std::string, search_state> searches_;           // search_key -> a running hpo stage's search
  std::map<policy::job_id, trial_run> trials_;             // trial segments in the policy
  // Trial segments' policy ids, above every stage's (seq * 64 + stage).
  policy::job_id next_trial_pid_ = policy::job_id(1) << 52;
  std::uint64_t next_seq_ = 1;
  event_sink sink_;
  stage_hook on_succeeded_;
  async_writer writer_;
  dataset_probe probe_;
  files::root_set read_roots_;
  std::string home_zone_ = "local";
  checkpoint_check check_;
  site_states site_states_;
  std::map<std::string, std::string> revoked_sites_;  // site -> the revocation's reason
  std::string grant_key_;
  runspec::template_cache templates_;  // parsed template texts, reused across submits
  mutable std::map<std::string, std::vector<std::string>> site_zones_;  // "<job>/<stage>" -> diloco.sites names
};

}  // namespace loom::scheduler
