// The offline subcommands of loom-trainer: `train`, `sample` and `logits`
// (our engine's logits on prompts, for checking an export). They need no
// running service. argv starts after the subcommand's name. Return the exit
// code (0 ok, 1 failed, 2 usage; see loom::exit_code).
#pragma once

namespace loom::trainer {

int train_main(int argc, char** argv);
int sample_main(int argc, char** argv);
int logits_main(int argc, char** argv);

}  // namespace loom::trainer
