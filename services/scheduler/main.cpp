// loom-scheduler: the control plane. Today it keeps the node roster; jobs,
// stages and placement arrive with the jobs issue.
#include "libs/runtime/service.hpp"
#include "services/scheduler/scheduler_logic.hpp"

int main(int argc, char** argv) {
  loom::runtime::service_spec spec;
  spec.name = "scheduler";
  spec.make_logic = [](loom::runtime::service_env&) { return std::make_unique<loom::scheduler::scheduler_logic>(); };
  return loom::runtime::service_main(argc, argv, spec);
}
