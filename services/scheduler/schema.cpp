#include "services/scheduler/schema.hpp"

#include "services/scheduler/jobs/job_store.hpp"
#include "services/scheduler/models/model_store.hpp"
#include "services/scheduler/node_repo.hpp"
#include "services/scheduler/sites/site_store.hpp"

namespace loom::scheduler {

std::span<const store::migration> scheduler_migrations() {
  // Times are unix nanoseconds; draining is 0/1 (the portable dialect has no
  // BOOLEAN); pid and resource counts fit BIGINT.
  static const store::migration all[] = {
      {.owner = "scheduler",
       .version = 1,
       .description = "nodes: the roster of registered nodes",
       .sql = R"sql(
CREATE TABLE nodes (
  id TEXT NOT NULL PRIMARY KEY,
  service TEXT NOT NULL,
  zone TEXT NOT NULL,
  cpu_cores BIGINT NOT NULL DEFAULT 0,
  gpus BIGINT NOT NULL DEFAULT 0,
  memory_bytes BIGINT NOT NULL DEFAULT 0,
  disk_bytes BIGINT NOT NULL DEFAULT 0,
  gpu_model TEXT NOT NULL DEFAULT '',
  endpoint TEXT NOT NULL DEFAULT '',
  pid BIGINT NOT NULL DEFAULT 0,
  version TEXT NOT NULL DEFAULT '',
  registered_unix_ns BIGINT NOT NULL,
  last_seen_unix_ns BIGINT NOT NULL,
  draining BIGINT NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
  row_version BIGINT NOT NULL DEFAULT 1
);
CREATE INDEX nodes_by_zone ON nodes (zone);
)sql"},
      jobs_migration(),
      groups_migration(),
      spec_migration(),
      sites_migration(),
      models_migration(),
      submit_request_migration(),
      data_hashes_migration(),
      site_reports_migration(),
      node_bindings_migration(),
      model_tenants_migration(),
      hpo_best_migration(),
      precision_migration(),
      hpo_search_migration(),
  };
  return all;
}

}  // namespace loom::scheduler
