// The model registry's rows in the state store (migration v6): one row per
// model version (append-only: a version never changes once written) and each
// model's current version (moved by a new version or a rollback). From v11 a
// version belongs to its job's tenant and a model name is per tenant: the
// current version is kept per (tenant, model). Each call runs inside the
// caller's transaction. Used by model_registry on the scheduler actor's thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <set>
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
  std::string tenant = "default";  // its job's tenant (v11)
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
  std::string tenant, model, version, set_by, reason;
  std::int64_t set_ns = 0;
};

// v6: model_versions (append-only), model_current.
const store::migration& models_migration();
// v8: model_versions.data_sha256, what each lineage entry hashed to.
const store::migration& data_hashes_migration();
// v11: model_versions.tenant (from each version's job), model_current keyed by
// (tenant, model): a model name is per tenant.
const store::migration& model_tenants_migration();

// Which versions a caller may see: its tenant's, or every tenant's (an admin).
struct model_scope {
  std::string tenant = "default";
  bool all_tenants = false;
  bool sees(const std::string& t) const { return all_tenants || t == tenant; }
};

status insert_model_version(store::transaction& tx, const model_version_rec& v);
// Newest first, within `scope`; `model` "" = all; `limit` 0 = no limit.
result<std::vector<model_version_rec>> load_model_versions(store::transaction& tx, const model_scope& scope,
                                                           const std::string& model, std::uint64_t limit);
result<std::optional<model_version_rec>> find_model_version(store::transaction& tx, const std::string& version);
// The version a job's stage registered, if any.
result<std::optional<model_version_rec>> find_stage_version(store::transaction& tx, const std::string& job_id,
                                                            const std::string& stage);
// The newest version of `tenant` whose checkpoint is `dir` or lies under it (a stage's init_from).
result<std::optional<model_version_rec>> find_checkpoint_version(store::transaction& tx, const std::string& tenant,
                                                                 const std::string& dir);
result<std::uint64_t> max_model_seq(store::transaction& tx);
status set_model_current(store::transaction& tx, const model_current_rec& c);
// The current version of (tenant, model); "" when it has none.
result<std::string> load_model_current(store::transaction& tx, const std::string& tenant, const std::string& model);
// Every version that is its (tenant, model)'s current one, within `scope`.
result<std::set<std::string>> load_current_versions(store::transaction& tx, const model_scope& scope);

}  // namespace loom::scheduler
