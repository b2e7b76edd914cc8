// The audit service's tables, as store migrations (libs/store/migrate.hpp).
// Run by loom-audit at start-up: store::migrate(db, audit_migrations()).
// Never edit a released migration: append a new version. Each carries its
// SQL as a literal, never built from library code that may change later.
#pragma once

#include "libs/store/migrate.hpp"

#include <span>

namespace loom::audit_service {

// v1: audit_events — one row per loom.v1.AuditEvent, append-only (triggers
// refuse UPDATE and DELETE on both engines). seq is the store's total order;
// (source, source_seq) is the emitter's dedup key.
// v2: v1's table kept as audit_events_v1; the hash chain's audit_events and
// audit_checkpoints (libs/auditchain's DDL as of v2's release).
std::span<const store::migration> audit_migrations();

}  // namespace loom::audit_service
