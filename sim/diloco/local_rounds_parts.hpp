// local_rounds_parts: what the two arms of local_rounds share (config checks,
// a trainer built from θ0 or a checkpoint, the lr schedule, the validation
// loss). Internal to local_rounds*.cpp; single-threaded like them.
#pragma once

#include "sim/diloco/local_rounds.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace loom::sim::detail {

// The seed of site s's window stream (the warm-up draws from other seeds).
std::uint64_t site_seed(std::uint64_t seed, int site);

status check(const local_config& c, const local_data& d, const local_checkpoint& from);

struct trainer_parts {
  engine::gpt2 model;
  engine::adamw opt;
};

// A model and its AdamW at `from` (θ0 = init_random(c.seed) and fresh moments
// when from.params is empty): every site and the DP model start alike.
result<trainer_parts> make_trainer(const local_config& c, const local_checkpoint& from);

// The cosine schedule over the whole run, warm-up phase included: the arms
// take its steps from.step .. from.step + c.steps − 1.
engine::lr_schedule schedule_of(const local_config& c, int warm_steps);

// Mean loss of `params` over c.eval_batches fixed windows spread evenly over `tokens`.
result<float> validation_loss(const local_config& c, const std::vector<std::int32_t>& tokens,
                              std::span<const float> params);

}  // namespace loom::sim::detail
