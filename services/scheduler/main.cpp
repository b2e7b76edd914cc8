// loom-scheduler: the control plane — the node roster and training jobs
// (stages placed on trainers by the scheduling policy), all in the state store.
#include "libs/runtime/service.hpp"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"

int main(int argc, char** argv) {
  loom::runtime::service_spec spec;
  spec.name = "scheduler";
  spec.migrations = loom::scheduler::scheduler_migrations;
  spec.make_logic = [](loom::runtime::service_env& env) {
    return std::make_unique<loom::scheduler::scheduler_logic>(
        env.db, [] { return std::chrono::system_clock::now(); }, env.paths.root + "/jobs");
  };
  return loom::runtime::service_main(argc, argv, spec);
}
