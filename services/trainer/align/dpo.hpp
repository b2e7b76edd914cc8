// dpo: Direct Preference Optimisation over the engine. A policy and a frozen
// reference gpt2 of the same shape (batch 2P, seq_len T) score a pair_batch:
// each row's response log-probability is Σ mask·log p over its tokens
// (gpt2::token_logprobs); dpo_loss gives the loss and dL/dπ per row, which
// becomes per-token gradients mask·dL/dπ for gpt2::backward_from_token_grads.
// The reference only runs forward. The driver owns its scratch; the models
// are the caller's. One thread drives it (the kernels use OpenMP inside).
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/align/losses.hpp"
#include "services/trainer/align/preference_data.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"

#include <span>
#include <vector>

namespace loom::align {

struct dpo_metrics {
  dpo_stats pref;
  double kl = -1;  // mean over response tokens of KL(π ‖ ref) (exact, from both models' logits); −1: not computed
};

struct dpo_step_result {
  dpo_metrics m;  // mean over the micro-batches
  float grad_norm = 0, lr = 0;
};

// Σ over each row's masked tokens of log p(target) of the model's last
// forward with targets: out (rows). REQUIRES: out.size() == b.mask.size() / b.seq_len.
void sequence_logprobs(const engine::gpt2& m, const pair_batch& b, std::vector<float>& token_scratch,
                       std::span<float> out);

class dpo_driver {
 public:
  // REQUIRES: policy and reference have the same config, batch and seq_len,
  // and outlive the driver.
  dpo_driver(engine::gpt2& policy, engine::gpt2& reference, dpo_options o) : pi_(policy), ref_(reference), o_(o) {}

  // Reference forward, policy forward, the loss; then (backward) the policy's
  // gradient of loss_scale × the loss into its grads(). with_kl also computes
  // the KL (one more pass over both (2P,T,V) logits). invalid_argument when
  // the batch does not fit the models.
  // ref_seq (2P), when given, are the reference's response log-prob sums of
  // this batch (reference_logprobs): the reference forward is skipped — the
  // reference is frozen, so a stage that revisits batches can compute them
  // once. Ignored with with_kl (which needs the reference's logits).
  result<dpo_metrics> run(const pair_batch& b, bool backward, float loss_scale = 1.0f, bool accumulate = false,
                          bool with_kl = false, std::span<const float> ref_seq = {});
  // The reference's response log-prob sums (2P) of a batch.
  result<std::vector<float>> reference_logprobs(const pair_batch& b);
  // The metrics, with KL, averaged over batches (no gradient).
  result<dpo_metrics> evaluate(std::span<const pair_batch> batches);
  // One optimiser step over micro-batches (each 1/k of the loss): clip, LR, AdamW.
  // ref_seqs: empty, or one reference_logprobs() result per micro-batch.
  // dp: data parallelism as engine::train_step's (each micro-batch counts
  // 1/dp->total_micro; gradients and metrics are all-reduced before the
  // clip and the update, so every member applies the same update).
  result<dpo_step_result> step(engine::adamw& opt, const engine::lr_schedule& s, float grad_clip, int step,
                               std::span<const pair_batch> micro, std::span<const std::vector<float>> ref_seqs = {},
                               const engine::data_parallel* dp = nullptr);

 private:
  engine::gpt2& pi_;
  engine::gpt2& ref_;
  dpo_options o_;
  std::vector<float> tok_, ref_seq_, pi_seq_, d_seq_, dlogp_, ref_logits_;
};

}  // namespace loom::align
