#include "services/audit/schema.hpp"

#include "libs/auditchain/store_io.hpp"
#include "libs/store/database.hpp"

namespace loom::audit_service {
namespace {

// v1 kept events unchained and in clear. v2 (the audit issue) moves them aside
// as audit_events_v1 — still append-only, still read for watermarks and
// queries, never chained — and creates the chained, encrypted audit_events
// and audit_checkpoints of libs/auditchain. The chain starts at seq 1 in v2.
// SQLite names triggers per database, so v1's triggers are dropped before the
// rename and v1 gets its own (audit_events_v1_append_only_*); PostgreSQL names
// them per table: the rename keeps them.
std::string v2_sql(store::backend engine) {
  std::string pre = engine == store::backend::sqlite
                        ? "DROP TRIGGER audit_events_append_only_update;\n"
                          "DROP TRIGGER audit_events_append_only_delete;\n"
                          "ALTER TABLE audit_events RENAME TO audit_events_v1;\n"
                          "DROP INDEX audit_events_by_request;\n"
                          "CREATE INDEX audit_events_v1_by_request ON audit_events_v1 (request_id);\n"
                        : "ALTER TABLE audit_events RENAME TO audit_events_v1;\n"
                          "ALTER INDEX audit_events_by_request RENAME TO audit_events_v1_by_request;\n"
                          "ALTER TABLE audit_events_v1 RENAME CONSTRAINT audit_events_pkey TO audit_events_v1_pkey;\n";
  return pre + auditchain::schema_sql(engine);
}

}  // namespace

std::span<const store::migration> audit_migrations() {
  // decision holds loom.v1.Decision's number; payload the serialized detail.
  static const store::migration all[] = {
      {.owner = "audit",
       .version = 1,
       .description = "audit_events: append-only log of audit events",
       .sql = R"sql(
CREATE TABLE audit_events (
  seq BIGINT NOT NULL PRIMARY KEY,
  source TEXT NOT NULL,
  source_seq BIGINT NOT NULL,
  unix_ns BIGINT NOT NULL,
  principal TEXT NOT NULL DEFAULT '',
  role TEXT NOT NULL DEFAULT '',
  zone TEXT NOT NULL DEFAULT '',
  action TEXT NOT NULL DEFAULT '',
  job_id TEXT NOT NULL DEFAULT '',
  request_id TEXT NOT NULL DEFAULT '',
  decision INTEGER NOT NULL DEFAULT 0,
  reason TEXT NOT NULL DEFAULT '',
  payload BYTEA,
  service TEXT NOT NULL DEFAULT '',
  peer_key TEXT NOT NULL DEFAULT '',
  UNIQUE (source, source_seq)
);
CREATE INDEX audit_events_by_request ON audit_events (request_id);
)sql",
       .append_only_tables = {"audit_events"}},
      {.owner = "audit",
       .version = 2,
       .description = "audit_events hash-chained with sealed payloads, audit_checkpoints; v1 rows kept as audit_events_v1",
       .sql = {},
       .sql_sqlite = v2_sql(store::backend::sqlite),
       .sql_postgres = v2_sql(store::backend::postgres),
       .append_only_tables = {"audit_events_v1", "audit_events", "audit_checkpoints"}},
  };
  return all;
}

}  // namespace loom::audit_service
