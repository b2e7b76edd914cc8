// metrics_log: the run's metrics.jsonl, one line per optimiser step:
//   {"step":12,"loss":5.123456,"lr":0.0006,"grad_norm":1.25,"tokens_per_s":2300.1,"ms_per_step":111.3}
// step counts completed steps (1-based); loss, lr and grad_norm are printed
// with 9 significant digits, which round-trips a float exactly, so two runs'
// logs compare bitwise. Opening for a resumed run drops the lines after the
// snapshot's step (and a torn last line), so the log reads as one run.
// Owned by one thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace loom::trainer {

struct step_record {
  std::uint64_t step = 0;
  float loss = 0, lr = 0, grad_norm = 0;
  double tokens_per_s = 0, ms_per_step = 0;
  // A stage's own metrics (alignment: accuracy, margin, kl, mean_reward, ...),
  // appended to the line in this order as "name":value (9 significant digits).
  std::vector<std::pair<std::string, double>> extra = {};  // "= {}": aggregate inits may leave it out
};

std::string to_jsonl(const step_record& r);  // one line, with '\n'

class metrics_log {
 public:
  metrics_log() = default;
  metrics_log(const metrics_log&) = delete;
  metrics_log& operator=(const metrics_log&) = delete;
  ~metrics_log();

  // Keeps the lines with step <= keep_through (0: none) and opens for append.
  // Returns the kept lines' losses, oldest first.
  result<std::vector<float>> open(const std::string& path, std::uint64_t keep_through);
  // The losses of the lines with step <= keep_through, oldest first, without
  // writing: what the other members of a trainer group read (rank 0 writes).
  static result<std::vector<float>> read_losses(const std::string& path, std::uint64_t keep_through);
  // Appends and flushes one line (to the kernel: survives kill -9 of this process).
  status append(const step_record& r);

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

}  // namespace loom::trainer
