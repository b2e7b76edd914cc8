// The ingest service's options from its environment: where datasets live,
// the import roots (<data>/imports, created here, plus the `loom up
// --import-root` directories endpoints.json remembers; one that fails
// layout::check_import_root is left out with a line on stderr), the task id
// file, the store and the audit sink. Called once in start_extra.
#pragma once

#include "services/ingest/tasks.hpp"

namespace loom::runtime {
struct service_env;
}

namespace loom::ingest {

task_runner_options runner_options(runtime::service_env& env);

}  // namespace loom::ingest
