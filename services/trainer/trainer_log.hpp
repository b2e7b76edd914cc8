// trainer_log: one line to the trainer's log (stderr: <data>/logs/trainer.log
// under `loom up`), flushed at once. fmt takes one or two %s.
#pragma once

#include <cstdio>
#include <string>

namespace loom::trainer {

inline void log(const char* fmt, const std::string& a, const std::string& b = "") {
  std::fprintf(stderr, fmt, a.c_str(), b.c_str());
  std::fflush(stderr);
}

}  // namespace loom::trainer
