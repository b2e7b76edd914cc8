// `loom-trainer serve`: the trainer service (what `loom up` starts) — its
// logic (TrainerStatus and the model exports' requests), its work loop
// (worker.hpp) and its model checks and exports (export/), wired into one
// supervised service.
#pragma once

namespace loom::trainer {

// Runs the service with serve's arguments (argv[0] is "serve"); its exit code.
int serve_main(int argc, char** argv);

}  // namespace loom::trainer
