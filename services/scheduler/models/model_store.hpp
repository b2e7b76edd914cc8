// The model registry's rows in the state store (migration v6): one row per
// model version (append-only: a version never changes once written) and each
// model's current version (moved by a new version or a rollback). Each call
// runs inside the caller's transaction. Used by model_registry on the
// scheduler actor's thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace loom::store {
class transaction;
struct migration;
}  // namespace loom::store

namespace loom::scheduler {

struct model_version_rec {
  std::string version;  // "mv-000012"
  std::uint64_t seq = 0;
  std::string model, job_id, stage, kind, checkpoint;
  std::uint64_t step = 0;
  std::string manifest_sha256, params_sha256, parent;
  std::vector<std::string> datasets;  // "dataset:NAME", "text:/path", "sft:/path", "shards:/path"
  std::map<std::string, std::string> data_sha256;  // per datasets entry (data_hashes.hpp); v8
  std::string tokenizer;
  std::map<std::string, double> metrics;
  std::string config_toml;
  std::int64_t created_ns = 0;
};

struct model_current_rec {
  std::string model, version, set_by, reason;
  std::int64_t set_ns = 0;
};

// v6: model_versions (append-only), model_current.
const store::migration& models_migration();
// v8: model_versions.data_sha256, what each lineage entry hashed to.
const store::migration& data_hashes_migration();

status insert_model_version(store::transaction& tx, const model_version_rec& v);
// Newest first; `model` "" = all; `limit` 0 = no limit.
result<std::vector<model_version_rec>> load_model_versions(store::transaction& tx, const std::string& model,
                                                           std::uint64_t limit);
result<std::optional<model_version_rec>> find_model_version(store::transaction& tx, const std::string& version);
// The version a job's stage registered, if any.
result<std::optional<model_version_rec>> find_stage_version(store::transaction& tx, const std::string& job_id,
                                                            const std::string& stage);
// The newest version whose checkpoint is `dir` or lies under it (a stage's init_from).
result<std::optional<model_version_rec>> find_checkpoint_version(store::transaction& tx, const std::string& dir);
result<std::uint64_t> max_model_seq(store::transaction& tx);
status set_model_current(store::transaction& tx, const model_current_rec& c);
result<std::map<std::string, std::string>> load_model_current(store::transaction& tx);  // model -> version

}  // namespace loom::scheduler
