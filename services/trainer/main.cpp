// loom-trainer: one binary, subcommands. `serve` runs the trainer service
// (what `loom up` starts: trainer_service.hpp); `train`, `sample` and `logits`
// run offline (train_cli.hpp).
#include "services/trainer/stage_process.hpp"
#include "services/trainer/train_cli.hpp"
#include "services/trainer/trainer_service.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "serve") return loom::trainer::serve_main(argc - 1, argv + 1);
  if (cmd == "train") return loom::trainer::train_main(argc - 2, argv + 2);
  if (cmd == "sample") return loom::trainer::sample_main(argc - 2, argv + 2);
  if (cmd == "logits") return loom::trainer::logits_main(argc - 2, argv + 2);
  if (cmd == "stage-child") return loom::trainer::stage_child_main(argc - 2, argv + 2);  // the service's child
  std::fprintf(stderr,
               "usage: loom-trainer serve [--data-dir D] [--zone Z] ...   run the trainer service\n"
               "       loom-trainer train --config FILE [--resume] ...    train a model (offline)\n"
               "       loom-trainer sample --checkpoint DIR --prompt TEXT  generate text (offline)\n"
               "       loom-trainer logits --checkpoint DIR --prompt TEXT... --out FILE  our logits (offline)\n");
  return cmd == "--help" || cmd == "-h" ? 0 : 2;
}
