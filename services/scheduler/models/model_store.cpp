#include "services/scheduler/models/model_store.hpp"

#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

#include <nlohmann/json.hpp>

namespace loom::scheduler {
namespace {

constexpr const char* version_columns =
    "SELECT version, seq, model, job_id, stage, kind, checkpoint, step, manifest_sha256, params_sha256, parent, "
    "datasets, tokenizer, metrics, config_toml, created_unix_ns, data_sha256 FROM model_versions";

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

status insert_model_version(store::transaction& tx, const model_version_rec& v) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const auto& [k, x] : v.metrics) metrics[k] = x;
  auto w = tx.exec(
      "INSERT INTO model_versions (version, seq, model, job_id, stage, kind, checkpoint, step, manifest_sha256, "
      "params_sha256, parent, datasets, tokenizer, metrics, config_toml, created_unix_ns, data_sha256) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)",
      {v.version, static_cast<std::int64_t>(v.seq), v.model, v.job_id, v.stage, v.kind, v.checkpoint,
       static_cast<std::int64_t>(v.step), v.manifest_sha256, v.params_sha256, v.parent,
       nlohmann::json(v.datasets).dump(), v.tokenizer, metrics.dump(), v.config_toml, v.created_ns,
       nlohmann::json(v.data_sha256).dump()});
  if (!w) return w.err();
  return ok_status();
}

result<std::vector<model_version_rec>> load_model_versions(store::transaction& tx, const std::string& model,
                                                           std::uint64_t limit) {
  const std::string lim = limit ? " LIMIT " + std::to_string(limit) : "";
  auto rows = model.empty() ? tx.query(std::string(version_columns) + " ORDER BY seq DESC" + lim)
                            : tx.query(std::string(version_columns) + " WHERE model = $1 ORDER BY seq DESC" + lim,
                                       {model});
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

result<std::optional<model_version_rec>> find_checkpoint_version(store::transaction& tx, const std::string& dir) {
  if (dir.empty()) return std::optional<model_version_rec>{};
  // A snapshot root names the newest step under it: match the root or the step dir.
  return first(tx.query(std::string(version_columns) +
                            " WHERE checkpoint = $1 OR substr(checkpoint, 1, length(CAST($2 AS TEXT))) = CAST($2 AS TEXT) "
                            "ORDER BY seq DESC LIMIT 1",
                        {dir, dir + (dir.ends_with("/") ? "" : "/")}));
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
      "INSERT INTO model_current (model, version, set_unix_ns, set_by, reason) VALUES ($1, $2, $3, $4, $5) "
      "ON CONFLICT (model) DO UPDATE SET version = excluded.version, set_unix_ns = excluded.set_unix_ns, "
      "set_by = excluded.set_by, reason = excluded.reason",
      {c.model, c.version, c.set_ns, c.set_by, c.reason});
  if (!w) return w.err();
  return ok_status();
}

result<std::map<std::string, std::string>> load_model_current(store::transaction& tx) {
  auto rows = tx.query("SELECT model, version FROM model_current");
  if (!rows) return rows.err();
  std::map<std::string, std::string> out;
  for (const auto& r : *rows) out[*r.get_text(0)] = *r.get_text(1);
  return out;
}

}  // namespace loom::scheduler
