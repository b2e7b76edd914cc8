// loom-scheduler: the control plane. Today it keeps the node roster (in the
// state store); jobs, stages and placement arrive with the jobs issue.
#include "libs/runtime/service.hpp"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"

int main(int argc, char** argv) {
  loom::runtime::service_spec spec;
  spec.name = "scheduler";
  spec.migrations = loom::scheduler::scheduler_migrations;
  spec.make_logic = [](loom::runtime::service_env& env) {
    return std::make_unique<loom::scheduler::scheduler_logic>(env.db);
  };
  return loom::runtime::service_main(argc, argv, spec);
}
