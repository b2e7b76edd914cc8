// local_search: hyper-parameter search over the real engine in one process —
// the proof of libs/hpo's ASHA before the scheduler runs it on trainers. Each
// trial trains a byte-level GPT (engine::gpt2, adamw, train_step) with its
// config's values applied to a base config; trials run one after another
// while hpo::run_workers plays W workers in virtual time (resource = steps).
// A trial keeps its model, optimizer and data stream in memory, so a
// promoted trial goes on from its own state: trained to R in pieces, it ends
// bit for bit where one straight run to R ends. Validation loss is measured
// at rung boundaries on fixed held-out windows.
//
//   run_sweep: every trial to `steps` (the reference a search is judged by).
//   run_asha:  ASHA over the same trials; the best trial's parameters are the
//              result's checkpoint.
// Single-threaded driver (the engine's kernels use OpenMP inside).
#pragma once

#include "sim/text/byte_text.hpp"  // licence_corpus, for callers

#include "libs/hpo/asha.hpp"
#include "libs/hpo/search_space.hpp"
#include "libs/hpo/worker_sim.hpp"
#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::sim {

struct search_data {
  std::vector<std::int32_t> train;
  std::vector<std::int32_t> validation;  // held out
};

// Base settings; a trial's overrides replace them (optim.lr, optim.min_lr,
// optim.warmup_steps, optim.weight_decay, optim.beta1, optim.beta2,
// optim.eps, optim.grad_clip, train.batch, train.seed; other keys are refused).
struct search_config {
  model::gpt2_config model;
  int batch = 8;
  int seq_len = 32;
  float lr = 3e-3f;
  float min_lr_ratio = 0.1f;  // min_lr = lr · this unless optim.min_lr is set
  int warmup = 20;
  float weight_decay = 0.1f;
  float beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f;
  float grad_clip = 1.0f;
  std::uint64_t seed = 7;  // every trial's init and data order (common random numbers)
  int eval_batches = 16;   // validation: this many (batch × seq_len) windows, fixed
  int workers = 4;         // simulated by run_workers
  // The engine's OpenMP threads (process-wide: kernels::set_threads), set
  // when the search starts; 0 leaves them as they are. 1 by default: a tiny
  // model's kernels are too small to share, and on busy cores two threads
  // made the sweep 7x slower in wall time (63 s vs 8.4 s). Bits do not depend on it.
  int threads = 1;
};

struct trial_result {
  hpo::trial_config config;
  std::int64_t steps = 0;   // trained
  double val_loss = 0;      // at `steps` (NaN: diverged)
  std::vector<std::pair<std::int64_t, double>> curve;  // (step, validation loss) at each measurement
};

struct search_result {
  int best = -1;  // trial index
  double best_loss = 0;
  std::int64_t best_steps = 0;
  std::int64_t steps = 0;  // trained, all trials
  std::vector<trial_result> trials;
  std::vector<float> best_params;  // the best trial's parameters at best_steps: the checkpoint
  hpo::sim_stats sim;              // run_asha only
};

// The bytes of `text` as tokens (vocab 256), the last `validation_fraction` held out.
search_data bytes_split(std::string_view text, double validation_fraction);

// Measures validation loss at each of `eval_at` (and at `steps`).
result<search_result> run_sweep(const search_config& cfg, const search_data& data,
                                const std::vector<hpo::trial_config>& trials, std::int64_t steps,
                                const std::vector<std::int64_t>& eval_at = {});
result<search_result> run_asha(const search_config& cfg, const search_data& data,
                               const std::vector<hpo::trial_config>& trials, const hpo::asha_options& opt);

}  // namespace loom::sim
