// reward_model: the GPT backbone (a gpt2 run without its LM head) plus a
// scalar head on the hidden state of ln_f at each row's last real token,
//   r = w·h + b   (w: C values, b: one),
// trained with the Bradley–Terry loss on pair_batches (chosen rows first).
// dL/dr flows back as dL/dh = dL/dr · w at that token only
// (gpt2::backward_from_hidden); the (B,T,V) logits are never computed.
// reward_head owns its C+1 parameters and gradients (checkpoint them as the
// tensors "reward_head.w" (C) and "reward_head.b" (1)); the driver owns its
// scratch, the models are the caller's. One thread drives it.
#pragma once

#include "libs/ckpt/safetensors.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/align/losses.hpp"
#include "services/trainer/align/preference_data.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace loom::align {

class reward_head {
 public:
  explicit reward_head(int channels) : C_(channels), p_(std::size_t(channels) + 1), g_(p_.size()) {}
  // w ~ N(0, 1/C) from mt19937_64(seed) (rewards start at about unit scale), b = 0.
  void init(std::uint64_t seed);
  int channels() const { return C_; }
  std::span<float> params() { return p_; }  // w (C) then b
  std::span<const float> params() const { return p_; }
  std::span<float> grads() { return g_; }
  // For engine::adamw: neither w nor b decays.
  std::vector<model::param_range> ranges() const;
  float score(const float* h) const;  // h: C values

  // Checkpoint: two F32 tensors, "reward_head.w" (C) and "reward_head.b" (1),
  // to write beside the backbone's 16 (views into params(): valid while the head lives).
  std::vector<ckpt::tensor_view> tensors() const;
  // From a file holding them: not_found when absent, invalid_argument for
  // another shape or dtype (the head is unchanged then).
  status load(const ckpt::safetensors_file& f);

 private:
  int C_;
  std::vector<float> p_, g_;
};

struct rm_step_result {
  bt_stats bt;  // mean over the micro-batches
  float grad_norm = 0, lr = 0;  // norm over backbone and head together
};

class reward_driver {
 public:
  // REQUIRES: head.channels() == backbone.config().channels; both outlive the driver.
  reward_driver(engine::gpt2& backbone, reward_head& head) : m_(backbone), head_(head) {}

  // Rewards (B) of rows whose last real token is at last[row] (inputs (B,T)).
  // invalid_argument for wrong sizes or a last outside [0, T).
  result<std::vector<float>> score(std::span<const std::int32_t> inputs, std::span<const int> last);
  // Bradley–Terry over a pair batch; with backward, loss_scale × its gradient
  // goes into the backbone's and the head's grads (accumulate = false overwrites).
  result<bt_stats> run(const pair_batch& b, bool backward, float loss_scale = 1.0f, bool accumulate = false);
  result<bt_stats> evaluate(std::span<const pair_batch> batches);
  // One optimiser step: micro-batches (1/k each), one clip over both parameter
  // sets, the scheduled LR, AdamW on each (body_opt over the backbone, head_opt over the head).
  // dp: data parallelism as engine::train_step's (backbone and head
  // gradients and the metrics all-reduced before the clip and the update).
  result<rm_step_result> step(engine::adamw& body_opt, engine::adamw& head_opt, const engine::lr_schedule& s,
                              float grad_clip, int step, std::span<const pair_batch> micro,
                              const engine::data_parallel* dp = nullptr);

 private:
  engine::gpt2& m_;
  reward_head& head_;
  std::vector<float> r_, dr_, dh_;
};

}  // namespace loom::align
