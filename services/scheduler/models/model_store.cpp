#include "services/scheduler/models/model_store.hpp"

#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

#include <nlohmann/json.hpp>

namespace loom::scheduler {
namespace {

constexpr const char* version_columns =
    "SELECT version, seq, model, job_id, stage, kind, checkpoint, step, manifest_sha256, params_sha256, parent, "
    "datasets, tokenizer, metrics, config_toml, created_unix_ns, data_sha256, tenant FROM model_versions";

model_version_rec version_of(const store::row& r) {
  auto t = [&](std::size_t i) { return r.get_text(i).ok() ? *r.get_text(i) : std::string(); };
  auto i = [&](std::size_t k) { return r.get_i64(k).ok() ? *r.get_i64(k) : 0; };
  model_version_rec v;
  v.version = t(0);
  v.seq = static_cast<std::uint64_t>(i(1));
  v.model = t(2);
  v.job_id = t(3);
  v.stage = t(4);
  v.kind = t(5);
  v.checkpoint = t(6);
  v.step = static_cast<std::uint64_t>(i(7));
  v.manifest_sha256 = t(8);
  v.params_sha256 = t(9);
  v.parent = t(10);
  auto ds = nlohmann::json::parse(t(11), nullptr, false);
  if (ds.is_array())
    for (const auto& d : ds)
      if (d.is_string()) v.datasets.push_back(d.get<std::string>());
  v.tokenizer = t(12);
  auto ms = nlohmann::json::parse(t(13), nullptr, false);
  if (ms.is_object())
    for (auto it = ms.begin(); it != ms.end(); ++it)
      if (it->is_number()) v.metrics[it.key()] = it->get<double>();
  v.config_toml = t(14);
  v.created_ns = i(15);
  auto hs = nlohmann::json::parse(t(16), nullptr, false);
  if (hs.is_object())
    for (auto it = hs.begin(); it != hs.end(); ++it)
      if (it->is_string()) v.data_sha256[it.key()] = it->get<std::string>();
  v.tenant = t(17);
  return v;
}

result<std::optional<model_version_rec>> first(result<std::vector<store::row>> rows) {
  if (!rows) return rows.err();
  if (rows->empty()) return std::optional<model_version_rec>{};
  return std::optional<model_version_rec>{version_of(rows->front())};
}

}  // namespace

const store::migration& models_migration() {
  // datasets: a JSON array of strings; metrics: a JSON object of numbers.
  static const store::migration m{
      .owner = "scheduler",
      .version = 6,
      .description = "model_versions (append-only) and model_current: the model registry",
      .sql = R"sql(
CREATE TABLE model_versions (
  version TEXT NOT NULL PRIMARY KEY,
  seq BIGINT NOT NULL UNIQUE,
  model TEXT NOT NULL,
  job_id TEXT NOT NULL,
  stage TEXT NOT NULL,
  kind TEXT NOT NULL,
  checkpoint TEXT NOT NULL,
  step BIGINT NOT NULL,
  manifest_sha256 TEXT NOT NULL,
  params_sha256 TEXT NOT NULL,
  parent TEXT NOT NULL DEFAULT '',
  datasets TEXT NOT NULL,
  tokenizer TEXT NOT NULL,
  metrics TEXT NOT NULL,
  config_toml TEXT NOT NULL,
  created_unix_ns BIGINT NOT NULL,
  UNIQUE (job_id, stage)
);
CREATE INDEX model_versions_by_model ON model_versions (model, seq);
CREATE TABLE model_current (
  model TEXT NOT NULL PRIMARY KEY,
  version TEXT NOT NULL REFERENCES model_versions (version),
  set_unix_ns BIGINT NOT NULL,
  set_by TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT ''
);
)sql",
      .append_only_tables = {"model_versions"}};
  return m;
}

const store::migration& data_hashes_migration() {
  // A JSON object: lineage entry -> SHA-256 hex (or why there is none).
  static const store::migration m{
      .owner = "scheduler",
      .version = 8,
      .description = "model_versions.data_sha256: the hashes of the data each version read",
      .sql = "ALTER TABLE model_versions ADD COLUMN data_sha256 TEXT NOT NULL DEFAULT '{}';\n"};
  return m;
}

const store::migration& model_tenants_migration() {
  // model_versions is append-only (triggers refuse UPDATE): the one UPDATE
  // that gives each stored version its job's tenant runs with the UPDATE
  // trigger lifted inside this migration's transaction and put back before
  // it commits. A version whose job row is gone keeps "default" (what a
  // job without a tenant belongs to). model_current is rebuilt keyed by
  // (tenant, model): a current version stays current for its own tenant,
  // and every other (tenant, model) that has versions gets its newest one,
  // so a name another tenant's version had taken over is that tenant's
  // only (issue 24 item 6).
  static const std::string tail = R"sql(
CREATE INDEX model_versions_by_tenant ON model_versions (tenant, model, seq);
CREATE TABLE model_current_v11 (
  tenant TEXT NOT NULL,
  model TEXT NOT NULL,
  version TEXT NOT NULL REFERENCES model_versions (version),
  set_unix_ns BIGINT NOT NULL,
  set_by TEXT NOT NULL,
  reason TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (tenant, model)
);
INSERT INTO model_current_v11 (tenant, model, version, set_unix_ns, set_by, reason)
  SELECT v.tenant, v.model, c.version, c.set_unix_ns, c.set_by, c.reason
  FROM model_current c JOIN model_versions v ON v.version = c.version;
INSERT INTO model_current_v11 (tenant, model, version, set_unix_ns, set_by, reason)
  SELECT v.tenant, v.model, v.version, v.created_unix_ns, 'scheduler', 'newest version of the tenant''s model (migration v11)'
  FROM model_versions v
  WHERE v.seq = (SELECT MAX(w.seq) FROM model_versions w WHERE w.tenant = v.tenant AND w.model = v.model)
    AND NOT EXISTS (SELECT 1 FROM model_current_v11 n WHERE n.tenant = v.tenant AND n.model = v.model);
DROP TABLE model_current;
ALTER TABLE model_current_v11 RENAME TO model_current;
)sql";
  static const std::string backfill =
      "UPDATE model_versions SET tenant = COALESCE((SELECT j.tenant FROM jobs j WHERE j.id = model_versions.job_id), "
      "'default');\n";
  static const store::migration m{
      .owner = "scheduler",
      .version = 11,
      .description = "model_versions.tenant (its job's) and model_current per (tenant, model): model names per tenant",
      .sql = "",
      .sql_sqlite = "ALTER TABLE model_versions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';\n"
                    "DROP TRIGGER model_versions_append_only_update;\n" +
                    backfill +
                    "CREATE TRIGGER model_versions_append_only_update BEFORE UPDATE ON model_versions "
                    "BEGIN SELECT RAISE(ABORT, 'model_versions is append-only'); END;\n" +
                    tail,
      .sql_postgres = "ALTER TABLE model_versions ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';\n"
                      "ALTER TABLE model_versions DISABLE TRIGGER model_versions_append_only;\n" +
                      backfill + "ALTER TABLE model_versions ENABLE TRIGGER model_versions_append_only;\n" + tail};
  return m;
}

status insert_model_version(store::transaction& tx, const model_version_rec& v) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [k, x] : v.metrics) metrics[k] = x;
  auto w = tx.exec(
      "INSERT INTO model_versions (version, seq, model, job_id, stage, kind, checkpoint, step, manifest_sha256, "
      "params_sha256, parent, datasets, tokenizer, metrics, config_toml, created_unix_ns, data_sha256, tenant) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18)",
      {v.version, static_cast<std::int64_t>(v.seq), v.model, v.job_id, v.stage, v.kind, v.checkpoint,
       static_cast<std::int64_t>(v.step), v.manifest_sha256, v.params_sha256, v.parent,
       nlohmann::json(v.datasets).dump(), v.tokenizer, metrics.dump(), v.config_toml, v.created_ns,
       nlohmann::json(v.data_sha256).dump(), v.tenant});
  if (!w) return w.err();
  return ok_status();
}

result<std::vector<model_version_rec>> load_model_versions(store::transaction& tx, const model_scope& scope,
                                                           const std::string& model, std::uint64_t limit) {
  std::string where;
  std::vector<store::value> args;
  auto cond = [&](const char* column, const std::string& v) {
    args.push_back(v);
    where += std::string(where.empty() ? " WHERE " : " AND ") + column + " = $" + std::to_string(args.size());
  };
  if (!scope.all_tenants) cond("tenant", scope.tenant);
  if (!model.empty()) cond("model", model);
  const std::string lim = limit ? " LIMIT " + std::to_string(limit) : "";
  auto rows = tx.query(std::string(version_columns) + where + " ORDER BY seq DESC" + lim, args);
  if (!rows) return rows.err();
  std::vector<model_version_rec> out;
  for (const auto& r : *rows) out.push_back(version_of(r));
  return out;
}

result<std::optional<model_version_rec>> find_model_version(store::transaction& tx, const std::string& version) {
  return first(tx.query(std::string(version_columns) + " WHERE version = $1", {version}));
}

result<std::optional<model_version_rec>> find_stage_version(store::transaction& tx, const std::string& job_id,
                                                            const std::string& stage) {
  return first(tx.query(std::string(version_columns) + " WHERE job_id = $1 AND stage = $2", {job_id, stage}));
}

result<std::optional<model_version_rec>> find_checkpoint_version(store::transaction& tx, const std::string& tenant,
                                                                 const std::string& dir) {
  if (dir.empty()) return std::optional<model_version_rec>{};
  // A snapshot root names the newest step under it: match the root or the step dir.
  return first(tx.query(std::string(version_columns) +
                            " WHERE tenant = $3 AND (checkpoint = $1 OR substr(checkpoint, 1, length(CAST($2 AS TEXT))) = "
                            "CAST($2 AS TEXT)) ORDER BY seq DESC LIMIT 1",
                        {dir, dir + (dir.ends_with("/") ? "" : "/"), tenant}));
}

result<std::uint64_t> max_model_seq(store::transaction& tx) {
  auto rows = tx.query("SELECT COALESCE(MAX(seq), 0) FROM model_versions");
  if (!rows) return rows.err();
  if (rows->empty()) return std::uint64_t{0};
  auto v = (*rows)[0].get_i64(0);
  return v.ok() ? static_cast<std::uint64_t>(*v) : 0;
}

status set_model_current(store::transaction& tx, const model_current_rec& c) {
  auto w = tx.exec(
      "INSERT INTO model_current (tenant, model, version, set_unix_ns, set_by, reason) VALUES ($1, $2, $3, $4, $5, $6) "
      "ON CONFLICT (tenant, model) DO UPDATE SET version = excluded.version, set_unix_ns = excluded.set_unix_ns, "
      "set_by = excluded.set_by, reason = excluded.reason",
      {c.tenant, c.model, c.version, c.set_ns, c.set_by, c.reason});
  if (!w) return w.err();
  return ok_status();
}

result<std::string> load_model_current(store::transaction& tx, const std::string& tenant, const std::string& model) {
  auto rows = tx.query("SELECT version FROM model_current WHERE tenant = $1 AND model = $2", {tenant, model});
  if (!rows) return rows.err();
  if (rows->empty()) return std::string();
  auto v = (*rows)[0].get_text(0);
  return v.ok() ? *v : std::string();
}

result<std::set<std::string>> load_current_versions(store::transaction& tx, const model_scope& scope) {
  auto rows = scope.all_tenants ? tx.query("SELECT version FROM model_current")
                                : tx.query("SELECT version FROM model_current WHERE tenant = $1", {scope.tenant});
  if (!rows) return rows.err();
  std::set<std::string> out;
  for (const auto& r : *rows)
    if (auto v = r.get_text(0); v.ok()) out.insert(*v);
  return out;
}

}  // namespace loom::scheduler
