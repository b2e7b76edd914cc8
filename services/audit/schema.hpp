// The audit service's tables, as store migrations (libs/store/migrate.hpp).
// Run by loom-audit at start-up: store::migrate(db, audit_migrations()).
// Never edit a released migration: append a new version.
#pragma once

#include "libs/store/migrate.hpp"

#include <span>

namespace loom::audit_service {

// v1: audit_events — one row per loom.v1.AuditEvent, append-only (triggers
// refuse UPDATE and DELETE on both engines). seq is the store's total order;
// (source, source_seq) is the emitter's dedup key.
std::span<const store::migration> audit_migrations();

}  // namespace loom::audit_service
