#include "services/audit/schema.hpp"

namespace loom::audit_service {
namespace {

// v1 kept events unchained and in clear.
constexpr const char* v1_sql = R"sql(
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
)sql";

// v2 (the audit issue) moves v1's events aside as audit_events_v1 — still
// append-only, still read for watermarks and queries, never chained — and
// creates the chained, encrypted audit_events and audit_checkpoints of
// libs/auditchain. The chain starts at seq 1 in v2. SQLite names triggers per
// database, so v1's triggers are dropped before the rename and v1 gets its own
// (audit_events_v1_append_only_*); PostgreSQL names them per table: the rename
// keeps them.
// The tables are the text auditchain::schema_sql() produced when v2 was
// released, frozen here byte for byte (the checksums in deployed databases
// cover it): a later change to the chain's DDL is a new migration, never an
// edit of this one. On SQLite seq is INTEGER PRIMARY KEY (the rowid), on
// PostgreSQL BIGINT.
constexpr const char* v2_sqlite = R"sql(DROP TRIGGER audit_events_append_only_update;
DROP TRIGGER audit_events_append_only_delete;
ALTER TABLE audit_events RENAME TO audit_events_v1;
DROP INDEX audit_events_by_request;
CREATE INDEX audit_events_v1_by_request ON audit_events_v1 (request_id);
CREATE TABLE audit_events (
  seq INTEGER NOT NULL PRIMARY KEY,
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
  payload BYTEA NOT NULL,
  service TEXT NOT NULL DEFAULT '',
  peer_key TEXT NOT NULL DEFAULT '',
  prev_hash BYTEA NOT NULL,
  row_hash BYTEA NOT NULL,
  UNIQUE (source, source_seq)
);
CREATE INDEX audit_events_by_job ON audit_events (job_id);
CREATE TABLE audit_checkpoints (
  seq INTEGER NOT NULL PRIMARY KEY,
  row_hash BYTEA NOT NULL,
  unix_ns BIGINT NOT NULL,
  key_id TEXT NOT NULL,
  signature BYTEA NOT NULL
);
)sql";

constexpr const char* v2_postgres = R"sql(ALTER TABLE audit_events RENAME TO audit_events_v1;
ALTER INDEX audit_events_by_request RENAME TO audit_events_v1_by_request;
ALTER TABLE audit_events_v1 RENAME CONSTRAINT audit_events_pkey TO audit_events_v1_pkey;
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
  payload BYTEA NOT NULL,
  service TEXT NOT NULL DEFAULT '',
  peer_key TEXT NOT NULL DEFAULT '',
  prev_hash BYTEA NOT NULL,
  row_hash BYTEA NOT NULL,
  UNIQUE (source, source_seq)
);
CREATE INDEX audit_events_by_job ON audit_events (job_id);
CREATE TABLE audit_checkpoints (
  seq BIGINT NOT NULL PRIMARY KEY,
  row_hash BYTEA NOT NULL,
  unix_ns BIGINT NOT NULL,
  key_id TEXT NOT NULL,
  signature BYTEA NOT NULL
);
)sql";

// v3 (issue 24, tenant walls): each chained row names the tenant whose trail
// it is, and the canonical encoding it was hashed with (auditchain row.hpp).
// Rows stored before keep tenant '' (admins only) and row_version 1, and
// verify as they always did; new rows are version 2, their tenant hashed.
// The same text on both engines.
constexpr const char* v3_sql = R"sql(ALTER TABLE audit_events ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
ALTER TABLE audit_events ADD COLUMN row_version INTEGER NOT NULL DEFAULT 1;
CREATE INDEX audit_events_by_tenant ON audit_events (tenant);
)sql";

// v4 (issue 32, retention): archived segments. audit_archives lists each
// file that holds a run of seqs moved out of audit_events (append-only like
// the chain); audit_archive_sources keeps, per segment, each source's
// highest source_seq in it, so a source whose every record was archived
// keeps its watermark (its next record is not taken for a gap). audit_events stays refusing UPDATE; a DELETE is refused by the
// store unless the row is (1) older than 180 days by the database's own
// clock — the seed's minimum retention, a floor no configuration lowers —
// (2) inside a segment audit_archives lists, and (3) not the newest row (the
// writer continues the chain from the live tail). So even an admin with a SQL
// prompt, or an audit service whose clock runs ahead, cannot delete a young
// or unarchived record; the service audits its refused attempts. 180 days is
// 15552000 s. TRUNCATE stays refused on PostgreSQL.
constexpr const char* v4_archive_table = R"sql(CREATE TABLE audit_archives (
  first_seq BIGINT NOT NULL PRIMARY KEY,
  last_seq BIGINT NOT NULL,
  rows BIGINT NOT NULL,
  prev_hash BYTEA NOT NULL,
  last_hash BYTEA NOT NULL,
  oldest_ns BIGINT NOT NULL,
  newest_ns BIGINT NOT NULL,
  created_ns BIGINT NOT NULL,
  file TEXT NOT NULL,
  sha256 TEXT NOT NULL
);
CREATE TABLE audit_archive_sources (
  first_seq BIGINT NOT NULL,
  source TEXT NOT NULL,
  max_source_seq BIGINT NOT NULL,
  PRIMARY KEY (first_seq, source)
);
)sql";

// One trigger, its reasons in the order PostgreSQL's function checks them
// (several triggers on one event fire in an unspecified order on SQLite).
constexpr const char* v4_sqlite_triggers = R"sql(DROP TRIGGER audit_events_append_only_delete;
CREATE TRIGGER audit_events_retention BEFORE DELETE ON audit_events
BEGIN
  SELECT CASE
    WHEN OLD.unix_ns >= (CAST(strftime('%s', 'now') AS INTEGER) - 15552000) * 1000000000
      THEN RAISE(ABORT, 'audit_events: a record younger than the 180-day retention is never deleted')
    WHEN OLD.seq > COALESCE((SELECT MAX(last_seq) FROM audit_archives), 0)
      THEN RAISE(ABORT, 'audit_events: a record is deleted only once an archive listed in audit_archives holds it')
    WHEN OLD.seq >= (SELECT MAX(seq) FROM audit_events)
      THEN RAISE(ABORT, 'audit_events: the newest record is never deleted (the chain continues from it)')
  END;
END;
)sql";

constexpr const char* v4_postgres_triggers = R"sql(DROP TRIGGER audit_events_append_only ON audit_events;
CREATE TRIGGER audit_events_append_only BEFORE UPDATE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION loom_refuse_append_only();
CREATE FUNCTION audit_events_retention() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF OLD.unix_ns >= (CAST(EXTRACT(EPOCH FROM clock_timestamp()) AS BIGINT) - 15552000) * 1000000000 THEN
    RAISE EXCEPTION 'audit_events: seq % is younger than the 180-day retention and is never deleted', OLD.seq
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.seq > COALESCE((SELECT MAX(last_seq) FROM audit_archives), 0) THEN
    RAISE EXCEPTION 'audit_events: seq % is deleted only once an archive listed in audit_archives holds it', OLD.seq
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  IF OLD.seq >= (SELECT MAX(seq) FROM audit_events) THEN
    RAISE EXCEPTION 'audit_events: seq % is the newest record and is never deleted (the chain continues from it)', OLD.seq
      USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN OLD;
END $$;
CREATE TRIGGER audit_events_retention BEFORE DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_retention();
)sql";

std::string v4(const char* triggers) { return std::string(v4_archive_table) + triggers; }

}  // namespace

std::span<const store::migration> audit_migrations() {
  // decision holds loom.v1.Decision's number; payload the serialized detail.
  static const store::migration all[] = {
      {.owner = "audit",
       .version = 1,
       .description = "audit_events: append-only log of audit events",
       .sql = v1_sql,
       .append_only_tables = {"audit_events"}},
      {.owner = "audit",
       .version = 2,
       .description = "audit_events hash-chained with sealed payloads, audit_checkpoints; v1 rows kept as audit_events_v1",
       .sql = {},
       .sql_sqlite = v2_sqlite,
       .sql_postgres = v2_postgres,
       .append_only_tables = {"audit_events_v1", "audit_events", "audit_checkpoints"}},
      {.owner = "audit",
       .version = 3,
       .description = "audit_events: tenant of each row, canonical row version (1 before tenants, 2 after)",
       .sql = v3_sql},
      {.owner = "audit",
       .version = 4,
       .description = "audit_archives: archived segments; audit_events rows deletable only archived, past 180 days",
       .sql = {},
       .sql_sqlite = v4(v4_sqlite_triggers),
       .sql_postgres = v4(v4_postgres_triggers),
       .append_only_tables = {"audit_archives", "audit_archive_sources"}},
  };
  return all;
}

}  // namespace loom::audit_service
