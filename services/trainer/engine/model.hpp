// gpt2: a GPT-2 model on the CPU in fp32 — parameters, gradients and every
// activation for one (batch, seq_len) shape, allocated once by create(); the
// step (forward, backward) allocates nothing. One thread drives it (kernels
// fan out with OpenMP inside). Move-only; views stay valid across moves.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "libs/status/status.hpp"
#include "services/trainer/engine/config.hpp"

namespace loom::engine {

// 64-byte aligned, zero-filled fp32 storage. Throws std::bad_alloc.
class float_buffer {
 public:
  float_buffer() = default;
  explicit float_buffer(std::size_t n);
  float* data() { return p_.get(); }
  const float* data() const { return p_.get(); }
  std::size_t size() const { return n_; }
  std::span<float> span() { return {p_.get(), n_}; }
  std::span<const float> span() const { return {p_.get(), n_}; }

 private:
  struct deleter { void operator()(float* p) const; };
  std::unique_ptr<float[], deleter> p_;
  std::size_t n_ = 0;
};

class gpt2 {
 public:
  // invalid_argument for a bad config or batch < 1, seq_len < 1, seq_len > max_seq_len;
  // resource_exhausted when the buffers cannot be allocated.
  static result<gpt2> create(const gpt2_config& cfg, int batch, int seq_len);

  // GPT-2 initialisation from a seed: N(0, 0.02) for wte (real rows), wpe,
  // qkvw and fcw; N(0, 0.02/√(2L)) for attprojw and fcprojw; LayerNorm weights
  // 1; biases and padding rows 0. Same seed -> same bits on any thread count.
  void init_random(std::uint64_t seed);

  // Forward over inputs (B,T) token ids. With targets (B,T), returns the mean
  // over tokens of loss·weight / Σweight (weights (B,T) >= 0; empty = all 1;
  // weight 0 masks a token, e.g. an SFT prompt); without, computes logits only
  // and returns 0. invalid_argument for wrong sizes, ids outside [0, V),
  // negative weights or Σweight == 0.
  result<float> forward(std::span<const std::int32_t> inputs,
                        std::span<const std::int32_t> targets = {},
                        std::span<const float> weights = {});

  // Adds to grads() the gradient of loss_scale × the last forward's loss; with
  // accumulate = false, writes it over whatever grads() held (what the first
  // micro-step does: no zero_grad pass over the whole buffer).
  // REQUIRES: the last forward() had targets and succeeded. Overwrites logits().
  void backward(float loss_scale = 1.0f, bool accumulate = true);
  void zero_grad();

  std::span<float> params() { return params_.span(); }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  tensor_views param_views() { return make_views(params_.data(), layout_); }
  tensor_views grad_views() { return make_views(grads_.data(), layout_); }
  const param_layout& layout() const { return layout_; }
  const gpt2_config& config() const { return cfg_; }
  int batch() const { return B_; }
  int seq_len() const { return T_; }
  // (B,T,Vp) logits of the last forward() (padding columns: logits of the
  // zero padding rows of wte). Valid until backward(), which overwrites them.
  std::span<const float> logits() const;

 private:
  gpt2() = default;
  struct acts;  // pointers into acts_, see model.cpp
  acts views();

  gpt2_config cfg_;
  param_layout layout_;
  int B_ = 0, T_ = 0;
  float_buffer params_, grads_;
  float_buffer acts_;     // everything forward saves for backward
  float_buffer scratch_;  // backward's per-layer gradients, reused across layers
  std::unique_ptr<std::int32_t[]> inputs_, targets_;
  const float* logits_ = nullptr;  // inside acts_
  float weight_sum_ = 0.0f;
  bool have_targets_ = false;
};

}  // namespace loom::engine
