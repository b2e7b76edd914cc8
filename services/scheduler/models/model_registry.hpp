// model_registry: the scheduler's model registry (issue 16 item 5). When a
// stage succeeds, its final checkpoint is verified (signature, every file's
// SHA-256) and becomes a model version with its lineage — job, stage, kind,
// what it read, tokenizer, parent version, parameter hash, metrics — and its
// model's current version. Rollback makes an earlier version current again
// only after its checkpoint verifies and hashes as recorded. Versions are
// append-only. Tenant walls (issue 24 item 6): a version belongs to its job's
// tenant, a model name is per tenant (the current version is kept per
// (tenant, model)), and every read or rollback takes the caller's
// model_scope — another tenant's version is not_found, worded as a version
// that does not exist. Runs on the scheduler actor's thread; verification reads the
// checkpoint files (a d12 snapshot: about a second).
#pragma once

#include "libs/ckpt/inspect.hpp"
#include "libs/status/status.hpp"
#include "services/scheduler/models/model_store.hpp"

#include <array>
#include <chrono>
#include <map>
#include <set>
#include <vector>
#include <functional>
#include <string>

namespace loom::store {
class database;
}

namespace loom::scheduler {

struct job_rec;

// What verification learns of a snapshot directory (<root>/step-N): its
// step, MANIFEST.json's and model.safetensors' SHA-256 and the eval figures
// beside it (libs/ckpt/inspect.hpp, shared with the aggregator, which
// inspects a checkpoint on its host for a scheduler on another).
using checkpoint_facts = ckpt::snapshot_facts;
using ckpt::stage_eval_beside;
// Verifies a snapshot directory; corruption naming every problem, not_found
// when it is not there.
using checkpoint_inspector = std::function<result<checkpoint_facts>(const std::string& dir)>;
// The local one: ckpt::inspect_snapshot with the deployment's signing key,
// read from `key_path` (<data>/keys/checkpoint.key) at each call. (The
// scheduler installs remote_checkpoint.hpp's choice of it or the aggregator's.)
checkpoint_inspector verifying_inspector(std::string key_path);

// A stage's lineage and figures, as the job manager knows them at its end.
struct stage_outcome {
  std::string tenant = "default";  // the job's
  std::string model, job_id, stage, kind, checkpoint, config_toml, init_from, tokenizer;
  std::string parent_stage;  // the job's previous stage ("" for the first)
  std::vector<std::string> datasets;
  std::map<std::string, double> metrics;
};
// The outcome of stage `i` of `j` (kind, datasets, tokenizer, init_from from
// its resolved config).
stage_outcome outcome_of(const job_rec& j, std::size_t i);

class model_registry {
 public:
  using clock_fn = std::function<std::chrono::system_clock::time_point()>;
  // data_dir: where datasets/NAME/ live, for the lineage's hashes (data_hashes.hpp); "" = none taken.
  model_registry(store::database* db, clock_fn now, checkpoint_inspector inspect, std::string data_dir = "");

  // Verifies the stage's checkpoint and stores it as the next version of its
  // tenant, current for its (tenant, model). Its parent is a version of the
  // same tenant only. already_exists when this stage was registered before;
  // corruption / not_found from verification.
  result<model_version_rec> register_stage(const stage_outcome& s);
  // Newest first, the scope's versions only.
  result<std::vector<model_version_rec>> list(const model_scope& scope, const std::string& model, std::uint64_t limit);
  // not_found for a version that does not exist or that the scope does not see.
  result<model_version_rec> get(const model_scope& scope, const std::string& version);
  // `version` and its ancestors, nearest first (up to 256: a longer chain is
  // a cycle, corruption); an ancestor outside the scope ends the chain.
  result<std::vector<model_version_rec>> lineage(const model_scope& scope, const std::string& version);
  // Every field that differs, as (field, a, b); config keys as "config <line>".
  result<std::vector<std::array<std::string, 3>>> diff(const model_version_rec& a, const model_version_rec& b);
  // The current version of `version`'s (tenant, model) becomes `version`;
  // returns the previous current version's id. not_found outside the scope;
  // corruption when the checkpoint no longer verifies or hashes differently
  // (nothing changes).
  result<std::string> rollback(const model_scope& scope, const std::string& version, const std::string& by,
                               const std::string& reason);
  // Every version of the scope that is its (tenant, model)'s current one.
  result<std::set<std::string>> current_versions(const model_scope& scope);
  result<bool> is_current(const model_version_rec& v);

 private:
  store::database* db_;
  clock_fn now_;
  checkpoint_inspector inspect_;
  std::string data_dir_;
};

}  // namespace loom::scheduler
