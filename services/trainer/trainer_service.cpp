#include "services/trainer/trainer_service.hpp"

#include "libs/runtime/service.hpp"
#include "services/trainer/config.hpp"
#include "services/trainer/export/export_wire.hpp"
#include "services/trainer/trainer_logic.hpp"
#include "services/trainer/worker.hpp"

#include <memory>

extern char** environ;

namespace loom::trainer {

int serve_main(int argc, char** argv) {
  if (!serve_env_ok(environ)) return 2;  // a bad LOOM_LINK_SHAPE* (config.cpp)
  runtime::service_spec spec;
  spec.name = "trainer";
  // One board: the worker changes it, the logic (TrainerStatus) reads it.
  auto board = std::make_shared<work_board>();
  // Model checks and exports: started with the worker, kept across restarts of the logic.
  auto exports = std::make_shared<std::shared_ptr<export_tasks>>();
  spec.make_logic = [board, exports](runtime::service_env&) {
    return std::make_unique<trainer_logic>(board, *exports);
  };
  // The work loop: polls the scheduler for stages and runs them (worker.hpp).
  spec.start_extra = [board, exports](runtime::service_env& env) -> result<std::shared_ptr<void>> {
    struct parts {
      std::shared_ptr<worker> work;
      std::shared_ptr<export_tasks> exp;
      ~parts() {
        if (exp) exp->shutdown();  // before env goes: its thread uses env's sockets
      }
    };
    auto p = std::make_shared<parts>();
    p->work = std::make_shared<worker>(env, board);
    p->exp = *exports = start_model_exports(env);
    return std::shared_ptr<void>(p);
  };
  return runtime::service_main(argc, argv, spec);
}

}  // namespace loom::trainer
