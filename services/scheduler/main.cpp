// loom-scheduler: the control plane — the node roster and training jobs
// (stages placed on trainers by the scheduling policy), all in the state
// store; every stored job event is also an audit record naming its job.
// Wiring only: config.hpp reads the settings, scheduler_service.hpp builds
// the logic, libs/runtime runs it.
#include "libs/runtime/service.hpp"
#include "services/scheduler/config.hpp"
#include "services/scheduler/scheduler_service.hpp"
#include "services/scheduler/schema.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  auto cfg = loom::scheduler::load_config([](const char* k) -> const char* { return std::getenv(k); });
  if (!cfg) {
    std::fprintf(stderr, "loom-scheduler: %s\n", cfg.err().message.c_str());
    return 2;
  }
  loom::runtime::service_spec spec;
  spec.name = "scheduler";
  spec.migrations = loom::scheduler::scheduler_migrations;
  spec.open_to_enrolment = true;  // edge sites enrol here before their keys are admitted
  spec.publishes_events = true;   // roster, jobs, sites, models changed: the console's live pages follow them
  spec.replicated = true;         // scheduler, scheduler-2 ...: one leads under the store's lease (issue 30)
  spec.make_logic = [c = *cfg](loom::runtime::service_env& env) { return loom::scheduler::make_logic(env, c); };
  return loom::runtime::service_main(argc, argv, spec);
}
