// local_align: reward-model and DPO training in one process at tiny scale on
// the synthetic preference set (synthetic_prefs.hpp), over the real engine —
// what the alignment criterion tests and align_bench run, reproducibly (fixed
// seeds, a fixed thread count). The start is SFT-ish: a byte-level model
// trained on the warm-up answers (every variant alike), so it has the format
// and no preference. Single-threaded driver (the kernels use OpenMP inside).
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/align/dpo.hpp"
#include "services/trainer/align/grpo.hpp"
#include "services/trainer/align/reward_model.hpp"
#include "services/trainer/align/synthetic_prefs.hpp"

#include <cstdint>
#include <vector>

namespace loom::align {

struct local_align_config {
  model::gpt2_config model{2, 4, 64, 32, 256, 256};  // byte-level: V = 256
  int seq_len = 24;  // "shout abcdef: ABCDEF!\n" is at most 22 bytes
  int pairs = 16;    // per batch: the models run batch 2·pairs
  int threads = 1;   // kernels' OpenMP threads: a model this small gains nothing from more
  std::uint64_t seed = 11;
  synthetic_options data;

  int warmup_steps = 300;  // SFT-ish start
  float warmup_lr = 3e-3f;

  int steps = 60;  // RM or DPO optimiser steps
  float lr = 1e-3f;
  float grad_clip = 1.0f;
  dpo_options dpo{0.1f, preference_loss::dpo};

  // GRPO with the synthetic rule as a programmatic reward.
  grpo_options grpo;
  int grpo_steps = 40;
  float grpo_lr = 3e-4f;
  int eval_prompts = 32;  // held-out prompts, `grpo.group` samples each, fixed seeds
};

struct local_batches {
  std::vector<pair_batch> train, held_out, warmup;
};

// The synthetic split rendered (synthetic_render, bytes) into batches of
// cfg.pairs; a tail short of a batch is dropped.
result<local_batches> synthetic_batches(const local_align_config& cfg);

// A model initialised from cfg.seed and trained cfg.warmup_steps on the
// warm-up batches (the LM loss on response tokens of both rows).
result<engine::gpt2> sft_start(const local_align_config& cfg, const local_batches& data);

struct dpo_run {
  dpo_metrics before, after;  // on the held-out batches
  std::vector<float> train_loss;
};
// DPO from `policy` (trained in place) against a frozen copy of it.
result<dpo_run> run_dpo(const local_align_config& cfg, engine::gpt2& policy, const local_batches& data);

struct rm_run {
  bt_stats before, after;  // on the held-out batches
  std::vector<float> train_loss;
};
// Reward-model training: backbone (trained in place) and head (initialised
// here from cfg.seed).
result<rm_run> run_reward_model(const local_align_config& cfg, engine::gpt2& backbone, reward_head& head,
                                const local_batches& data);

struct grpo_run {
  grpo_stats before, after;  // on the held-out prompts (same sampling seeds), by the training reward
  double rule_before = 0, rule_after = 0;  // the same samples' mean synthetic_format_score (the ground truth)
  std::vector<float> train_reward;
};
// GRPO from `policy` (trained in place) against a frozen copy of it on train
// prompts, rewarded by `reward` (empty: synthetic_format_reward; e.g.
// reward_model_reward for RM → RL); evaluated on held-out prompts by the
// same reward and by synthetic_format_score, the ground truth.
result<grpo_run> run_grpo(const local_align_config& cfg, engine::gpt2& policy, reward_fn reward = {});

// synthetic_format_score over a rollout batch of byte-level samples (a
// trailing stop token '\n' dropped): a programmatic reward for grpo_driver.
reward_fn synthetic_format_reward();

// A gpt2 of the same shape holding a copy of m's parameters.
result<engine::gpt2> clone(const engine::gpt2& m);

}  // namespace loom::align
