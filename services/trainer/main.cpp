// loom-trainer: one binary, subcommands. `serve` runs the trainer service
// (what `loom up` starts); `train`, `sample` and `logits` run offline (train_cli.hpp).
#include "libs/runtime/service.hpp"
#include "services/trainer/config.hpp"
#include "services/trainer/export/export_wire.hpp"
#include "services/trainer/train_cli.hpp"
#include "services/trainer/trainer_logic.hpp"
#include "services/trainer/worker.hpp"

#include <cstdio>
#include <string>

extern char** environ;

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "serve") {
    if (!loom::trainer::serve_env_ok(environ)) return 2;  // a bad LOOM_LINK_SHAPE* (config.cpp)
    loom::runtime::service_spec spec;
    spec.name = "trainer";
    // One board: the worker changes it, the logic (TrainerStatus) reads it.
    auto board = std::make_shared<loom::trainer::work_board>();
    // Model checks and exports: started with the worker, kept across restarts of the logic.
    auto exports = std::make_shared<std::shared_ptr<loom::trainer::export_tasks>>();
    spec.make_logic = [board, exports](loom::runtime::service_env&) {
      return std::make_unique<loom::trainer::trainer_logic>(board, *exports);
    };
    // The work loop: polls the scheduler for stages and runs them (worker.hpp).
    spec.start_extra = [board, exports](loom::runtime::service_env& env) -> loom::result<std::shared_ptr<void>> {
      struct parts {
        std::shared_ptr<loom::trainer::worker> work;
        std::shared_ptr<loom::trainer::export_tasks> exp;
        ~parts() { if (exp) exp->shutdown(); }  // before env goes: its thread uses env's sockets
      };
      auto p = std::make_shared<parts>();
      p->work = std::make_shared<loom::trainer::worker>(env, board);
      p->exp = *exports = loom::trainer::start_model_exports(env);
      return std::shared_ptr<void>(p);
    };
    return loom::runtime::service_main(argc - 1, argv + 1, spec);
  }
  if (cmd == "train") return loom::trainer::train_main(argc - 2, argv + 2);
  if (cmd == "sample") return loom::trainer::sample_main(argc - 2, argv + 2);
  if (cmd == "logits") return loom::trainer::logits_main(argc - 2, argv + 2);
  std::fprintf(stderr,
               "usage: loom-trainer serve [--data-dir D] [--zone Z] ...   run the trainer service\n"
               "       loom-trainer train --config FILE [--resume] ...    train a model (offline)\n"
               "       loom-trainer sample --checkpoint DIR --prompt TEXT  generate text (offline)\n"
               "       loom-trainer logits --checkpoint DIR --prompt TEXT... --out FILE  our logits (offline)\n");
  return cmd == "--help" || cmd == "-h" ? 0 : 2;
}
