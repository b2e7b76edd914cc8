// train_step: one optimiser step of the GPT-2 engine — forward and backward
// over each micro-batch (gradient accumulation), global-norm clipping, the
// scheduled learning rate, AdamW. The whole training loop body, top to bottom.
// Allocates nothing; one thread calls it.
#pragma once

#include <cstdint>
#include <span>

#include "libs/status/status.hpp"
#include "services/trainer/engine/model.hpp"
#include "services/trainer/engine/optimizer.hpp"

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

// Each micro-batch's loss counts 1/k (k = micro.size()). grad_clip <= 0 turns
// clipping off. step counts from 0 (the schedule's step). On an error nothing
// has been updated, but grads() may hold a partial sum.
result<step_stats> train_step(gpt2& model, adamw& opt, const lr_schedule& schedule,
                              float grad_clip, int step, std::span<const micro_batch> micro);

}  // namespace loom::engine
