// config: the scheduler's settings, from its environment, parsed strictly —
// a value that is not what the variable takes stops the service at start with
// the variable named (service_main prints it), never a silent default.
//
//   LOOM_SCHEDULER_MIN_RUNTIME_S   seconds a stage runs before a higher-priority job
//                                  may preempt it: a whole number 0..31536000 (default 60)
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <functional>

namespace loom::scheduler {

struct scheduler_config {
  std::chrono::milliseconds min_runtime{60'000};
};

// `env` looks a variable up (std::getenv in the service; a map in tests).
using env_lookup = std::function<const char*(const char*)>;
result<scheduler_config> load_config(const env_lookup& env);

}  // namespace loom::scheduler
