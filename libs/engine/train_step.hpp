// train_step: one optimiser step of the GPT-2 engine — forward and backward
// over each micro-batch (gradient accumulation), global-norm clipping, the
// scheduled learning rate, AdamW. The whole training loop body, top to bottom.
// Allocates nothing; one thread calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "libs/status/status.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"

namespace loom::engine {

// One micro-batch of model.batch() × model.seq_len() tokens.
struct micro_batch {
  std::span<const std::int32_t> inputs;
  std::span<const std::int32_t> targets;
  std::span<const float> weights;  // empty = every token weight 1
};

struct step_stats {
  float loss = 0;       // mean of the micro-batches' losses
  float grad_norm = 0;  // before clipping
  float lr = 0;
};

// Data parallelism across trainer processes: this member computes micro.size()
// of the step's total_micro micro-batches; all_reduce_sum sums a buffer over
// every member in place (the trainer service passes libs/collective's ring).
// Gradients and loss are summed before the norm, the clip and the update, so
// every member applies the same update to the same parameters.
struct data_parallel {
  int total_micro = 0;
  std::function<status(std::span<float>)> all_reduce_sum;
};

// Each micro-batch's loss counts 1/k (k = micro.size(), or dp->total_micro).
// grad_clip <= 0 turns clipping off. step counts from 0 (the schedule's step).
// On an error (a failed all-reduce, or the model's interrupt flag: see
// gpt2::set_interrupt) nothing has been updated, but grads() may hold a partial sum.
result<step_stats> train_step(gpt2& model, adamw& opt, const lr_schedule& schedule, float grad_clip, int step,
                              std::span<const micro_batch> micro, const data_parallel* dp = nullptr);

}  // namespace loom::engine
