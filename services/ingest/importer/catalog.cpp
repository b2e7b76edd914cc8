#include "services/ingest/importer/catalog.hpp"

#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"

#include <algorithm>
#include <limits>

namespace loom::ingest {
namespace {

std::int64_t i64(std::uint64_t v) { return static_cast<std::int64_t>(v); }

std::int64_t limit_of(std::size_t limit) {
  return limit == 0 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(limit);
}

// PostgreSQL refuses NUL in TEXT; a reject's detail may quote raw input.
std::string no_nul(std::string s) {
  s.erase(std::remove(s.begin(), s.end(), '\0'), s.end());
  return s;
}

std::string text(const store::row& r, std::size_t i) {
  auto t = r.get_text(i);
  return t ? std::move(*t) : std::string();
}
std::int64_t num(const store::row& r, std::size_t i) {
  auto v = r.get_i64(i);
  return v ? *v : 0;
}

constexpr const char* dataset_columns =
    "name, version, import_id, documents, tokens, shards, bytes, state, created_unix_ns, updated_unix_ns, "
    "report_path, rejects, damage, verified_unix_ns, tenant";

dataset_row to_dataset(const store::row& r) {
  dataset_row d;
  d.name = text(r, 0);
  d.version = num(r, 1);
  d.import_id = text(r, 2);
  d.documents = num(r, 3);
  d.tokens = num(r, 4);
  d.shards = num(r, 5);
  d.bytes = num(r, 6);
  d.state = text(r, 7);
  d.created_ns = num(r, 8);
  d.updated_ns = num(r, 9);
  d.report_path = text(r, 10);
  d.rejects = num(r, 11);
  d.damage = text(r, 12);
  d.verified_ns = num(r, 13);
  d.tenant = text(r, 14);
  return d;
}

}  // namespace

std::span<const store::migration> ingest_migrations() {
  // Times are unix nanoseconds. dataset_shards.idx is the manifest position;
  // import_rejects keeps only each dataset's latest import (record_import
  // replaces them), so it does not grow with re-imports.
  static const store::migration all[] = {
      {.owner = "ingest",
       .version = 1,
       .description = "datasets, dataset_shards, import_rejects: the ingest catalogue",
       .sql = R"sql(
CREATE TABLE datasets (
  name TEXT NOT NULL PRIMARY KEY,
  version BIGINT NOT NULL,
  import_id TEXT NOT NULL,
  documents BIGINT NOT NULL DEFAULT 0,
  tokens BIGINT NOT NULL DEFAULT 0,
  shards BIGINT NOT NULL DEFAULT 0,
  bytes BIGINT NOT NULL DEFAULT 0,
  state TEXT NOT NULL CHECK (state IN ('importing', 'ready', 'failed', 'deleted')),
  created_unix_ns BIGINT NOT NULL,
  updated_unix_ns BIGINT NOT NULL,
  report_path TEXT NOT NULL DEFAULT ''
);
CREATE TABLE dataset_shards (
  dataset TEXT NOT NULL REFERENCES datasets (name),
  idx BIGINT NOT NULL,
  name TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  tokens BIGINT NOT NULL,
  docs BIGINT NOT NULL,
  node TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (dataset, name)
);
CREATE INDEX dataset_shards_by_node ON dataset_shards (node);
CREATE TABLE import_rejects (
  dataset TEXT NOT NULL REFERENCES datasets (name),
  import_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  stage TEXT NOT NULL,
  file TEXT NOT NULL,
  line BIGINT NOT NULL DEFAULT 0,
  rule TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (import_id, seq)
);
CREATE INDEX import_rejects_by_dataset ON import_rejects (dataset, seq);
)sql"},
      // The true reject count (the rows stop at record_import's cap; for rows
      // of earlier versions the count of stored rows is the best there is),
      // and what `loom data verify` last found.
      {.owner = "ingest",
       .version = 2,
       .description = "datasets.rejects, datasets.damage, datasets.verified_unix_ns",
       .sql = R"sql(
ALTER TABLE datasets ADD COLUMN rejects BIGINT NOT NULL DEFAULT 0;
ALTER TABLE datasets ADD COLUMN damage TEXT NOT NULL DEFAULT '';
ALTER TABLE datasets ADD COLUMN verified_unix_ns BIGINT NOT NULL DEFAULT 0;
UPDATE datasets SET rejects = (SELECT COUNT(*) FROM import_rejects WHERE import_rejects.dataset = datasets.name);
)sql"},
      // Datasets per tenant: every table keyed by (tenant, name), the rows
      // of before owned by `default` (whose datasets keep their directories,
      // libs/layout/dataset_dirs.hpp). The old tables are renamed, copied and
      // dropped (neither engine changes a primary key in place); the new
      // keys are named so that they do not meet the old ones' index names.
      {.owner = "ingest",
       .version = 3,
       .description = "datasets, dataset_shards, import_rejects keyed by (tenant, name)",
       .sql = R"sql(
DROP INDEX dataset_shards_by_node;
DROP INDEX import_rejects_by_dataset;
ALTER TABLE import_rejects RENAME TO import_rejects_v2;
ALTER TABLE dataset_shards RENAME TO dataset_shards_v2;
ALTER TABLE datasets RENAME TO datasets_v2;
CREATE TABLE datasets (
  tenant TEXT NOT NULL,
  name TEXT NOT NULL,
  version BIGINT NOT NULL,
  import_id TEXT NOT NULL,
  documents BIGINT NOT NULL DEFAULT 0,
  tokens BIGINT NOT NULL DEFAULT 0,
  shards BIGINT NOT NULL DEFAULT 0,
  bytes BIGINT NOT NULL DEFAULT 0,
  state TEXT NOT NULL CHECK (state IN ('importing', 'ready', 'failed', 'deleted')),
  created_unix_ns BIGINT NOT NULL,
  updated_unix_ns BIGINT NOT NULL,
  report_path TEXT NOT NULL DEFAULT '',
  rejects BIGINT NOT NULL DEFAULT 0,
  damage TEXT NOT NULL DEFAULT '',
  verified_unix_ns BIGINT NOT NULL DEFAULT 0,
  CONSTRAINT datasets_by_tenant_key PRIMARY KEY (tenant, name)
);
INSERT INTO datasets (tenant, name, version, import_id, documents, tokens, shards, bytes, state, created_unix_ns,
                      updated_unix_ns, report_path, rejects, damage, verified_unix_ns)
  SELECT 'default', name, version, import_id, documents, tokens, shards, bytes, state, created_unix_ns,
         updated_unix_ns, report_path, rejects, damage, verified_unix_ns FROM datasets_v2;
CREATE TABLE dataset_shards (
  tenant TEXT NOT NULL,
  dataset TEXT NOT NULL,
  idx BIGINT NOT NULL,
  name TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  bytes BIGINT NOT NULL,
  tokens BIGINT NOT NULL,
  docs BIGINT NOT NULL,
  node TEXT NOT NULL DEFAULT '',
  CONSTRAINT dataset_shards_by_tenant_key PRIMARY KEY (tenant, dataset, name),
  FOREIGN KEY (tenant, dataset) REFERENCES datasets (tenant, name)
);
INSERT INTO dataset_shards (tenant, dataset, idx, name, sha256, bytes, tokens, docs, node)
  SELECT 'default', dataset, idx, name, sha256, bytes, tokens, docs, node FROM dataset_shards_v2;
CREATE INDEX dataset_shards_by_node ON dataset_shards (node);
CREATE TABLE import_rejects (
  tenant TEXT NOT NULL,
  dataset TEXT NOT NULL,
  import_id TEXT NOT NULL,
  seq BIGINT NOT NULL,
  stage TEXT NOT NULL,
  file TEXT NOT NULL,
  line BIGINT NOT NULL DEFAULT 0,
  rule TEXT NOT NULL,
  detail TEXT NOT NULL DEFAULT '',
  CONSTRAINT import_rejects_by_tenant_key PRIMARY KEY (tenant, dataset, import_id, seq),
  FOREIGN KEY (tenant, dataset) REFERENCES datasets (tenant, name)
);
INSERT INTO import_rejects (tenant, dataset, import_id, seq, stage, file, line, rule, detail)
  SELECT 'default', dataset, import_id, seq, stage, file, line, rule, detail FROM import_rejects_v2;
CREATE INDEX import_rejects_by_dataset ON import_rejects (tenant, dataset, seq);
DROP TABLE import_rejects_v2;
DROP TABLE dataset_shards_v2;
DROP TABLE datasets_v2;
)sql"},
  };
  return all;
}

status catalog::record_import(const std::string& tenant, const import_summary& s, std::int64_t now_ns,
                              std::uint64_t max_rejects) {
  std::int64_t bytes = 0;
  for (const auto& sh : s.manifest.shards) bytes += i64(sh.bytes);
  const std::string rejects_path = s.dir + "/" + std::string(rejects_file_name);
  return db_.with_transaction([&](store::transaction& tx) -> status {
    auto up = tx.exec(
        "INSERT INTO datasets (name, version, import_id, documents, tokens, shards, bytes, state, created_unix_ns, "
        "updated_unix_ns, report_path, rejects, tenant) VALUES ($1, 1, $2, $3, $4, $5, $6, 'ready', $7, $7, $8, $9, "
        "$10) ON CONFLICT (tenant, name) DO UPDATE SET version = datasets.version + 1, import_id = excluded.import_id, "
        "documents = excluded.documents, tokens = excluded.tokens, shards = excluded.shards, bytes = excluded.bytes, "
        "state = 'ready', updated_unix_ns = excluded.updated_unix_ns, report_path = excluded.report_path, "
        "rejects = excluded.rejects, damage = '', verified_unix_ns = 0",
        {s.dataset, s.import_id, i64(s.kept), i64(s.tokens), i64(s.manifest.shards.size()), bytes, now_ns,
         s.report_path, i64(s.rejects), tenant});
    if (!up) return up.err();
    if (auto d = tx.exec("DELETE FROM dataset_shards WHERE tenant = $1 AND dataset = $2", {tenant, s.dataset}); !d)
      return d.err();
    for (std::size_t i = 0; i < s.manifest.shards.size(); ++i) {
      const auto& sh = s.manifest.shards[i];
      auto w = tx.exec(
          "INSERT INTO dataset_shards (dataset, idx, name, sha256, bytes, tokens, docs, node, tenant) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
          {s.dataset, i64(i), sh.name, sh.sha256, i64(sh.bytes), i64(sh.tokens), i64(sh.docs), sh.node, tenant});
      if (!w) return w.err();
    }
    if (auto d = tx.exec("DELETE FROM import_rejects WHERE tenant = $1 AND dataset = $2", {tenant, s.dataset}); !d)
      return d.err();
    if (max_rejects == 0) return ok_status();
    status failed;
    auto rd = read_rejects(rejects_path, max_rejects, [&](reject_entry&& e) {
      auto w = tx.exec(
          "INSERT INTO import_rejects (dataset, import_id, seq, stage, file, line, rule, detail, tenant) "
          "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
          {s.dataset, s.import_id, i64(e.seq), no_nul(std::move(e.stage)), no_nul(std::move(e.file)), i64(e.line),
           no_nul(std::move(e.rule)), no_nul(std::move(e.detail)), tenant});
      if (!w) failed = w.err();
      return w.ok();
    });
    if (!rd) return rd;
    if (!failed) return failed;
    // A summary that undercounts (a pull: no import summary) still shows every stored row.
    auto fix = tx.exec(
        "UPDATE datasets SET rejects = (SELECT COUNT(*) FROM import_rejects WHERE tenant = $2 AND dataset = $1) "
        "WHERE tenant = $2 AND name = $1 AND "
        "rejects < (SELECT COUNT(*) FROM import_rejects WHERE tenant = $2 AND dataset = $1)",
        {s.dataset, tenant});
    return fix ? ok_status() : status(fix.err());
  });
}

status catalog::record_verify(const std::string& tenant, const std::string& dataset, const std::string& import_id,
                              const std::string& damage, std::int64_t now_ns) {
  return db_.with_transaction([&](store::transaction& tx) -> status {
    auto rows = tx.query("SELECT import_id FROM datasets WHERE tenant = $1 AND name = $2", {tenant, dataset});
    if (!rows) return rows.err();
    if (rows->empty() || text(rows->front(), 0) != import_id)
      return make_error(errc::not_found, "dataset " + dataset + " is no longer version " + import_id +
                                             " (re-imported while it was verified)");
    auto up = tx.exec("UPDATE datasets SET damage = $2, verified_unix_ns = $3 WHERE name = $1 AND tenant = $4",
                      {dataset, no_nul(damage), now_ns, tenant});
    return up ? ok_status() : status(up.err());
  });
}

status catalog::record_placement(const std::string& tenant, const std::string& dataset, const std::string& import_id,
                                 const shards::manifest& m, std::int64_t now_ns,
                                 const std::function<status()>& publish) {
  return db_.with_transaction([&](store::transaction& tx) -> status {
    auto rows = tx.query("SELECT import_id FROM datasets WHERE tenant = $1 AND name = $2", {tenant, dataset});
    if (!rows) return rows.err();
    if (rows->empty() || text(rows->front(), 0) != import_id)
      return make_error(errc::not_found, "dataset " + dataset + " is no longer version " + import_id +
                                             " (re-imported while it was placed)");
    for (const auto& sh : m.shards) {
      auto w = tx.exec("UPDATE dataset_shards SET node = $4 WHERE tenant = $1 AND dataset = $2 AND name = $3",
                       {tenant, dataset, sh.name, sh.node});
      if (!w) return w.err();
    }
    auto up = tx.exec("UPDATE datasets SET updated_unix_ns = $3 WHERE tenant = $1 AND name = $2", {tenant, dataset, now_ns});
    if (!up) return up.err();
    return publish();
  });
}

result<std::vector<dataset_row>> catalog::datasets(const std::string& tenant, std::size_t limit) {
  return db_.with_read_transaction([&](store::transaction& tx) -> result<std::vector<dataset_row>> {
    auto rows = tenant.empty()
                    ? tx.query(std::string("SELECT ") + dataset_columns +
                                   " FROM datasets ORDER BY tenant, name LIMIT $1",
                               {limit_of(limit)})
                    : tx.query(std::string("SELECT ") + dataset_columns +
                                   " FROM datasets WHERE tenant = $2 ORDER BY name LIMIT $1",
                               {limit_of(limit), tenant});
    if (!rows) return rows.err();
    std::vector<dataset_row> out;
    for (const auto& r : *rows) out.push_back(to_dataset(r));
    return out;
  });
}

result<std::optional<dataset_row>> catalog::dataset(const std::string& tenant, const std::string& name) {
  return db_.with_read_transaction([&](store::transaction& tx) -> result<std::optional<dataset_row>> {
    auto rows = tx.query(std::string("SELECT ") + dataset_columns + " FROM datasets WHERE tenant = $1 AND name = $2",
                         {tenant, name});
    if (!rows) return rows.err();
    if (rows->empty()) return std::optional<dataset_row>();
    return std::optional<dataset_row>(to_dataset(rows->front()));
  });
}

result<std::vector<shard_row>> catalog::shards(const std::string& tenant, const std::string& dataset) {
  return db_.with_read_transaction([&](store::transaction& tx) -> result<std::vector<shard_row>> {
    auto rows = tx.query(
        "SELECT dataset, name, sha256, node, bytes, tokens, docs FROM dataset_shards WHERE tenant = $1 AND dataset = $2 "
        "ORDER BY idx",
        {tenant, dataset});
    if (!rows) return rows.err();
    std::vector<shard_row> out;
    for (const auto& r : *rows)
      out.push_back({text(r, 0), text(r, 1), text(r, 2), text(r, 3), num(r, 4), num(r, 5), num(r, 6)});
    return out;
  });
}

result<std::uint64_t> catalog::stored_rejects(const std::string& tenant, const std::string& dataset) {
  return db_.with_read_transaction([&](store::transaction& tx) -> result<std::uint64_t> {
    auto rows = tx.query("SELECT COUNT(*) FROM import_rejects WHERE tenant = $1 AND dataset = $2", {tenant, dataset});
    if (!rows) return rows.err();
    return rows->empty() ? std::uint64_t{0} : static_cast<std::uint64_t>(num(rows->front(), 0));
  });
}

result<std::vector<reject_row>> catalog::rejects(const std::string& tenant, const std::string& dataset,
                                                 std::size_t limit, std::uint64_t offset) {
  return db_.with_read_transaction([&](store::transaction& tx) -> result<std::vector<reject_row>> {
    auto rows = tx.query(
        "SELECT dataset, import_id, seq, stage, file, line, rule, detail FROM import_rejects "
        "WHERE tenant = $4 AND dataset = $1 ORDER BY seq LIMIT $2 OFFSET $3",
        {dataset, limit_of(limit), i64(offset), tenant});
    if (!rows) return rows.err();
    std::vector<reject_row> out;
    for (const auto& r : *rows)
      out.push_back({text(r, 0), text(r, 1), num(r, 2), text(r, 3), text(r, 4), num(r, 5), text(r, 6), text(r, 7)});
    return out;
  });
}

}  // namespace loom::ingest
