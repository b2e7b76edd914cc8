// loom-ingest: the edge-side data engine — imports (clean, dedup, PII,
// licences, annotations, tokenize, 16 MiB shards) as tasks, the dataset
// catalogue in the state store, and incremental sync between sites.
#include "libs/runtime/service.hpp"
#include "services/ingest/config.hpp"
#include "services/ingest/importer/catalog.hpp"
#include "services/ingest/ingest_logic.hpp"
#include "services/ingest/roster.hpp"
#include "services/ingest/sync_service.hpp"
#include "services/ingest/tasks.hpp"

#include <memory>

int main(int argc, char** argv) {
  using namespace loom;
  // Owned by the handle start_extra returns, which service_main releases
  // before it stops the audit emitter the tasks write to; main keeps only
  // weak references so nothing outlives that order.
  std::weak_ptr<ingest::task_runner> tasks_ref;
  std::weak_ptr<ingest::sync_service> sync_ref;
  runtime::service_spec spec;
  spec.name = "ingest";
  spec.migrations = ingest::ingest_migrations;
  spec.start_extra = [&tasks_ref, &sync_ref](runtime::service_env& env) -> result<std::shared_ptr<void>> {
    auto tasks = std::make_shared<ingest::task_runner>(ingest::runner_options(env));
    auto s = ingest::sync_service::start({.data_dir = env.paths.root, .keys = env.keys, .bind = "", .tasks = tasks});
    if (!s) return s.err();
    std::shared_ptr<ingest::sync_service> sync = std::move(*s);
    tasks_ref = tasks;
    sync_ref = sync;
    return std::static_pointer_cast<void>(std::make_shared<std::pair<decltype(tasks), decltype(sync)>>(tasks, sync));
  };
  spec.make_logic = [&tasks_ref, &sync_ref](runtime::service_env& env) {
    auto sync = sync_ref.lock();  // alive: start_extra ran first and its handle is held
    ingest::ingest_parts parts;
    parts.tasks = tasks_ref.lock();
    parts.db = env.db;
    parts.datasets_root = env.paths.root + "/datasets";
    parts.sync_info = [s = sync] { return s->info(); };
    parts.pull = [s = sync](const loom::v1::PullDatasetRequest& r, const std::string& principal) {
      return s->pull(r.dataset(), r.endpoint(), r.public_key(), principal);
    };
    parts.trainer_nodes = [&env] { return ingest::trainer_nodes(env); };
    return std::make_unique<ingest::ingest_logic>(std::move(parts));
  };
  return runtime::service_main(argc, argv, spec);
}
