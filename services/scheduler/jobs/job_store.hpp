// job_store: the jobs, job_stages, job_events and job_requests tables
// (scheduler migrations v2-v4, v7, v12) and the records the job manager keeps in memory. Functions run inside
// the caller's transaction; no state of their own.
#pragma once

#include "libs/diloco/progress/site_progress.hpp"

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::store {
class transaction;
struct migration;
}  // namespace loom::store

namespace loom::scheduler {

// A diloco stage's site as its trainer last reported it (PollWork): live
// progress for `loom job watch`, kept in memory only.
using site_line = diloco::site_progress;

// An hpo stage's result (hpo_stage.cpp, when its search ends): the best
// trial, the values it ran with, the validation loss it was picked by and
// what the search spent. Stored (migration v12, job_stages.hpo_best as JSON):
// `loom job show` reads it after a restart too.
struct hpo_best_rec {
  std::int64_t trial = -1;  // -1: none (not an hpo stage, or its search is not done)
  std::vector<std::pair<std::string, std::string>> values;  // key, value as the trial's override set it
  double validation_loss = 0;
  std::uint64_t step = 0;  // R: where it was trained to and scored
  std::string checkpoint;
  std::uint64_t steps_granted = 0, sweep_steps = 0;
};

struct stage_rec {
  std::string name;
  std::string config_toml;
  std::string state = "pending";  // pending, queued, running, succeeded, failed, cancelled
  std::uint64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0, tokens_per_s = 0;
  std::string node;        // the trainer running it (rank 0 of its group), or that ran it last
  std::vector<std::string> members;  // the group by rank while placed; empty while queued
  std::uint64_t generation = 0;      // formations of the group so far (migration v3)
  // From the run spec at submit (migration v4): the group's size range and
  // what one member needs in memory; reload reads them, never the TOML.
  std::uint32_t min_trainers = 1, max_trainers = 1;
  std::uint64_t memory_bytes = 0;
  // Times its trainer stopped answering while running it (lost from the
  // roster), counted by policy_stages::lost_again: past
  // job_manager::max_node_losses the stage fails instead of being placed
  // again unchanged (a crash loop: out of memory at load, or at the same
  // step each time; or a stage that hangs every trainer it runs on). A loss
  // after progress, with the trainer lost before back, starts the count
  // again: a link cut or a kill -9 mid-training is not a loop.
  // `step_at_loss`, `lost_from` and `lost_ns` (not stored: after a restart
  // the next loss counts as the first) are the step reported, the trainer
  // and the time when it was last lost. A trainer that registers again and
  // says it was cut off (silent, its loop on time) over that time takes the
  // loss back (policy_stages::cut_off).
  std::uint32_t node_losses = 0;
  std::uint64_t step_at_loss = 0;
  std::string lost_from;
  std::int64_t lost_ns = 0;
  std::uint32_t regroups = 0;        // re-formations asked by members since the scheduler started
  std::string checkpoint;  // latest snapshot reported
  std::uint32_t attempts = 0;
  std::int64_t started_ns = 0, finished_ns = 0;
  std::vector<site_line> sites;  // diloco: by site name (not stored; the next polls refill it)
  // diloco, at its end: the sites the aggregator accepted a delta from, and
  // those it never had one from (member 0's last report; not stored: the
  // stage's events say it too).
  std::vector<std::string> contributed, missing;
  hpo_best_rec hpo_best;  // an hpo stage, once its search is done
  std::string precision;  // what its matmuls run in (member 0's report: fp32, bf16; migration v13)
  // An hpo stage while its search runs: ASHA's journal, each trial's last
  // checkpoint, trainer and attempt, and the segments placed (hpo_stage.cpp
  // writes and reads it; migration v14). "" otherwise.
  std::string hpo_search;
};

struct job_rec {
  std::string id;          // job-000001
  std::uint64_t seq = 0;   // 1, 2, ...: arrival order
  std::string request_id;  // the submit's request key, principal "\n" request id (idempotency)
  std::string body_sha256; // of the submit's request message ("" before v7: job_requests holds it)
  std::string name, template_name, state = "queued", tenant, priority_class, zone, principal, message, out_dir;
  std::vector<std::string> overrides;
  std::int64_t submitted_ns = 0, updated_ns = 0;
  std::vector<stage_rec> stages;
  std::uint64_t next_event = 1;  // seq of the next job_events row
  bool terminal() const { return state == "succeeded" || state == "failed" || state == "cancelled"; }
};

// A request id a principal used for a mutation (submit, cancel): a retry
// with the same id answers what the first did; another body under it is a
// conflict. Request ids are per principal.
struct request_rec {
  std::string principal, request_id, kind;  // kind: submit, cancel
  std::string body_sha256;                  // of the request message
  std::string job_id;
  std::int64_t unix_ns = 0;
};

struct job_event {
  std::uint64_t seq = 0;
  std::int64_t unix_ns = 0;
  std::string stage, kind, text;
};

// The scheduler's migration v2 (jobs, job_stages, job_events), v3 (a
// stage's group: members by rank and its generation) and v4 (the stage's
// spec figures and node losses; request ids per principal).
const store::migration& jobs_migration();
const store::migration& groups_migration();
const store::migration& spec_migration();
const store::migration& submit_request_migration();
// v12: job_stages.hpo_best, an hpo stage's best trial (hpo_best_rec) as JSON.
const store::migration& hpo_best_migration();
// v13: job_stages.matmul_precision, what a stage's matmuls ran in (issue 28).
const store::migration& precision_migration();
// v14: job_stages.hpo_search, a running hpo search's state (hpo_stage.cpp's JSON).
const store::migration& hpo_search_migration();

result<std::vector<job_rec>> load_jobs(store::transaction& tx);
// Inserts or updates the job row and all its stage rows.
status save_job(store::transaction& tx, const job_rec& j);
// Writes only one stage's progress columns (the frequent update).
status save_stage(store::transaction& tx, const job_rec& j, std::size_t stage_index);
status add_event(store::transaction& tx, const std::string& job_id, const job_event& e);
status add_request(store::transaction& tx, const request_rec& r);
result<std::vector<request_rec>> load_requests(store::transaction& tx);
result<std::vector<job_event>> load_events(store::transaction& tx, const std::string& job_id, std::uint64_t after);

}  // namespace loom::scheduler
