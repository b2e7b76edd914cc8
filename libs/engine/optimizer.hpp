// AdamW with decoupled weight decay, the cosine learning-rate schedule with
// linear warm-up, and global-norm gradient clipping. adamw owns its moment
// buffers (2 floats per parameter); one thread drives it (OpenMP inside).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "libs/model/gpt_config.hpp"
#include "libs/engine/model.hpp"

namespace loom::engine {

struct adamw_config {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // applied only to ranges with decay = true
};

class adamw {
 public:
  // ranges must cover [0, num_params) without overlap (model::param_layout::ranges()).
  // Allocates m and v (8 bytes per parameter); throws std::bad_alloc.
  adamw(std::size_t num_params, adamw_config cfg, std::vector<model::param_range> ranges);

  // One update, step t = steps_taken() + 1, for every parameter i:
  //   g = grad_scale·grads[i];  m = β1·m + (1-β1)·g;  v = β2·v + (1-β2)·g²
  //   p -= lr·wd·p   (decay ranges only; decoupled, PyTorch order)
  //   p -= lr · (m / (1-β1ᵗ)) / (√(v / (1-β2ᵗ)) + eps)
  // grad_scale carries the clipping factor so clipping costs no extra pass.
  // bf16_copy, when not empty (one value per parameter), receives each new
  // parameter rounded to bf16 (to_bf16) in the same pass: the copy a bf16
  // model multiplies with (gpt2::update_target), with no second pass over
  // the parameters. The fp32 update is the same bits either way.
  void step(std::span<float> params, std::span<const float> grads, float lr,
            float grad_scale = 1.0f, std::span<std::uint16_t> bf16_copy = {});

  int steps_taken() const { return t_; }
  std::span<const float> m() const { return m_.span(); }
  std::span<const float> v() const { return v_.span(); }

  // Puts back the state a checkpoint saved: the moments and the number of
  // steps taken. invalid_argument (nothing changed) when a size differs or t < 0.
  status restore(std::span<const float> m, std::span<const float> v, int t);

 private:
  adamw_config cfg_;
  std::vector<model::param_range> ranges_;
  float_buffer m_, v_;
  int t_ = 0;
};

// lr(step), step counted from 0:
//   step < warmup:        max_lr · (step+1) / warmup
//   warmup <= step < total: min_lr + ½(max_lr - min_lr)(1 + cos(π·(step-warmup)/(total-warmup)))
//   step >= total:        min_lr
struct lr_schedule {
  float max_lr = 6e-4f;
  float min_lr = 6e-5f;
  int warmup_steps = 0;
  int total_steps = 1;

  float at(int step) const;
};

// √(Σ g²), summed in double over 256 fixed chunks in order: the same bits for
// any thread count.
double global_norm(std::span<const float> g);
// The factor that brings a gradient of norm `norm` down to max_norm:
// max_norm / (norm + 1e-6) when norm > max_norm, else 1. max_norm <= 0: no clipping.
float clip_scale(double norm, float max_norm);

}  // namespace loom::engine
