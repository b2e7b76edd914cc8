// `loom suggest`'s rules: settings a job could run better with, each read
// from what the job measured — the node's cores and memory against the
// stage's threads and micro-batch, the precision against the host's CPU, the
// learning rate against the loss curve's shape, a cross-site stage's stalls
// against its H and codec, a curve still falling at its end, the model's
// size against its data's tokens, the documents an import rejected — with the
// numbers behind it, the `--set` that applies it and the metric it should
// move. Ordered by the gain they expect, largest first. Pure functions.
#pragma once

#include "libs/diagnose/evidence.hpp"

#include <string>
#include <vector>

namespace loom::diagnose {

// What this host knows of the CPU that ran the stage (when it ran here).
struct cpu_facts {
  bool known = false;
  bool bf16 = false;  // avx512_bf16 or amx_bf16: the engine's bf16 matmuls run natively
};

struct suggestion {
  std::string id;      // "threads", "micro_batch", "precision", "lr_lower", "lr_higher", "diloco_h", "more_steps",
                       // "model_smaller", "model_larger", "data_rejects"
  std::string title;   // in words
  std::string stage;
  std::vector<std::string> evidence;  // the numbers behind it
  std::vector<std::string> sets;      // the --set overrides that apply it ("train.threads=8"); none for data_rejects
  std::string command;                // the job submitted again with them (data_rejects: `loom data rejects D`)
  std::string metric;                 // what it should improve: "tokens_per_s", "loss" or "tokens" (data kept)
  double gain = 0;                    // expected, relative (0.5: half again); orders the list
};

std::vector<suggestion> suggest(const evidence& e, const cpu_facts& cpu);

}  // namespace loom::diagnose
