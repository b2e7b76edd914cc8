// loom-trainer: one binary, subcommands. `serve` runs the trainer service
// (what `loom up` starts); `train` and `sample` arrive with the engine.
#include "libs/runtime/service.hpp"
#include "services/trainer/trainer_logic.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  std::string cmd = argc > 1 ? argv[1] : "";
  if (cmd == "serve") {
    loom::runtime::service_spec spec;
    spec.name = "trainer";
    spec.make_logic = [](loom::runtime::service_env&) { return std::make_unique<loom::trainer::trainer_logic>(); };
    return loom::runtime::service_main(argc - 1, argv + 1, spec);
  }
  std::fprintf(stderr,
               "usage: loom-trainer serve [--data-dir D] [--zone Z] ...   run the trainer service\n"
               "       (train and sample come with the trainer engine)\n");
  return cmd == "--help" || cmd == "-h" ? 0 : 2;
}
