// ingest_service: the ingest service's parts built from its config and the
// runtime's service_env — the task runner and the sync server, started once
// in start_extra (they outlive restarts of the service actor), and the
// request logic over them, made at start and after every crash of the actor.
// main.cpp only wires these to runtime::service_main.
#pragma once

#include "libs/runtime/service.hpp"
#include "services/ingest/config.hpp"
#include "services/ingest/tasks.hpp"

#include <memory>

namespace loom::ingest {

class sync_service;

// The task runner's options from the environment: where datasets live, the
// import roots (<data>/imports, created here, plus the `loom up
// --import-root` directories endpoints.json remembers; one that fails
// layout::check_import_root is left out with a line on stderr), the task id
// file, the store and the audit sink.
task_runner_options runner_options(runtime::service_env& env);

// The parts start_extra makes. main keeps them as weak references: the
// handle start_extra returns owns them, and service_main releases it before
// it stops the audit emitter the tasks write to.
struct ingest_handles {
  std::weak_ptr<task_runner> tasks;
  std::weak_ptr<sync_service> sync;
};

// Starts the task runner and the sync server (on c.sync_bind); the returned
// handle owns both. unavailable when the sync endpoint cannot be bound.
result<std::shared_ptr<void>> start_parts(runtime::service_env& env, const ingest_config& c, ingest_handles& out);

// REQUIRES: start_parts succeeded and its handle is still held.
std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, const ingest_handles& h);

}  // namespace loom::ingest
