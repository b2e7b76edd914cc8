#include "services/audit/schema.hpp"

namespace loom::audit_service {

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
  };
  return all;
}

}  // namespace loom::audit_service
