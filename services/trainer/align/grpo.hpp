// grpo: policy optimisation against a reward with group-relative advantages
// (GRPO, Shao et al. 2024) and a KL penalty to a frozen reference. Each step
// samples `group` completions for each of B/group prompts from the policy
// (batched: one forward per generated token over the whole (B,T) batch;
// draws by run/sampler's pick() from per-row seeded generators), scores them
// with a reward function (a rule, or a reward model), and takes one on-policy
// gradient step on
//   J = (1/B) Σ_i (1/|y_i|) Σ_t [ −A_i log π(y_it) + β_kl k3_it ],
//   A_i = (r_i − mean of its group) / (std of its group + 1e-6),
//   k3_it = exp(ref_it − π_it) − (ref_it − π_it) − 1   (≥ 0, unbiased for KL(π‖ref)),
// so dJ/dlog π(y_it) = (1/B)(1/|y_i|)(−A_i + β_kl (1 − exp(ref_it − π_it))).
// Why GRPO and not PPO: no value head to train, and the group mean is the
// baseline; with one update per batch the PPO ratio is 1 and its clip inert.
// The models are the caller's; the driver owns its scratch. One thread.
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/align/reward_model.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace loom::align {

// B sampled completions: row i = prompt (i / group), sample (i % group).
struct rollout_batch {
  int rows = 0, seq_len = 0;
  std::vector<int> prompt_index;                    // (B) into the prompts given to sample()
  std::vector<std::vector<std::int32_t>> response;  // (B) sampled ids, the stop token included when drawn
  std::vector<std::int32_t> inputs, targets;        // (B,T) prompt ++ response, padded with 0
  std::vector<float> mask;                          // (B,T) 1 where the target is a response token
  std::vector<int> last;                            // (B) index of the last real token
};

// Rewards (B) for a batch of completions.
using reward_fn = std::function<result<std::vector<float>>(const rollout_batch&)>;

struct grpo_options {
  int group = 8;  // k completions per prompt; policy.batch() must be a multiple
  float temperature = 1.0f;
  int top_k = 0;  // 0: the whole vocabulary
  int max_new_tokens = 10;
  std::int32_t stop_token = '\n';
  float kl_coef = 0.05f;  // β_kl
};

struct grpo_stats {
  double mean_reward = 0, reward_std = 0;  // over the batch's samples
  double kl = 0;           // mean over response tokens: k3 in a step; exact (from logits) in evaluate
  double entropy = 0;      // mean policy entropy over response tokens (evaluate only)
  double mean_length = 0;  // response tokens
  float grad_norm = 0, lr = 0;
};

// A reward model as the reward: rm scores each sample at its last token.
// REQUIRES: rm's backbone has the rollouts' batch and seq_len (else the
// reward_fn answers invalid_argument); rm outlives the reward_fn.
reward_fn reward_model_reward(reward_driver& rm);

class grpo_driver {
 public:
  // REQUIRES: policy and reference of the same shape, batch a multiple of
  // o.group; all outlive the driver.
  grpo_driver(engine::gpt2& policy, engine::gpt2& reference, reward_fn reward, grpo_options o)
      : pi_(policy), ref_(reference), reward_(std::move(reward)), o_(o) {}

  // Samples `group` completions per prompt; prompts.size() · group == batch.
  // invalid_argument for a wrong count, an empty prompt or one that leaves no room to answer.
  result<rollout_batch> sample(std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed);
  // Sample, reward, one AdamW step on J (clip, scheduled LR).
  result<grpo_stats> step(engine::adamw& opt, const engine::lr_schedule& s, float grad_clip, int step,
                          std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed);
  // Sample and reward without an update; exact KL and entropy from the logits.
  result<grpo_stats> evaluate(std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed);

 private:
  result<std::vector<float>> score(const rollout_batch& b, grpo_stats& st);

  engine::gpt2& pi_;
  engine::gpt2& ref_;
  reward_fn reward_;
  grpo_options o_;
  std::vector<float> tok_, ref_tok_, dlogp_, ref_logits_;
  std::vector<std::pair<float, std::uint32_t>> pick_scratch_;
};

}  // namespace loom::align
