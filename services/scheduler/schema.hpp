// The scheduler's tables, as store migrations (libs/store/migrate.hpp). Run by
// the scheduler at start-up: store::migrate(db, scheduler_migrations()).
// Never edit a released migration: append a new version.
#pragma once

#include "libs/store/migrate.hpp"

#include <span>

namespace loom::scheduler {

// v1: nodes — the roster (roster.hpp) persisted; one row per registered node,
// optimistically versioned through row_version (store/versioned.hpp).
// v2: jobs, job_stages, job_events (jobs/job_store.hpp); v3, v4 there too.
// v5: sites, site_keys, site_tokens (sites/site_store.hpp).
// v10: node_bindings — each node id's CURVE key, zone and drain, kept when
// the roster forgets the node (node_repo.hpp).
std::span<const store::migration> scheduler_migrations();

}  // namespace loom::scheduler
