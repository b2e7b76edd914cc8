// gpt2: a GPT-2 model on the CPU in fp32 (matmuls in bf16 on request) — parameters, gradients and every
// activation for one (batch, seq_len) shape, allocated once by create(); the
// step (forward, backward) allocates nothing. One thread drives it (kernels
// fan out with OpenMP inside). Move-only; views stay valid across moves.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string_view>

#include "libs/engine/bf16.hpp"
#include "libs/status/status.hpp"
#include "libs/model/gpt_config.hpp"

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
  // invalid_argument for a bad config or batch < 1, seq_len < 1, seq_len > max_seq_len,
  // or p == automatic; resource_exhausted when the buffers cannot be allocated;
  // unavailable for bf16 where oneDNN has no bf16 matmul. Made in precision p
  // from the start: no fp32 activations are allocated for a bf16 model (what
  // set_precision would briefly hold both of: 1.8 GB more at d12, B·T = 2048).
  static result<gpt2> create(const model::gpt2_config& cfg, int batch, int seq_len,
                             precision p = precision::fp32);

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
  // micro-step does: no zero_grad pass over the whole buffer). False when the
  // interrupt flag stopped it (grads() then holds a partial sum).
  // REQUIRES: the last forward() had targets and succeeded. Overwrites logits().
  bool backward(float loss_scale = 1.0f, bool accumulate = true);
  // A test forward() and backward() call between layers: once it says true
  // they stop (forward with errc::unavailable "interrupted"), so a stop
  // request (cancel, preemption) ends even a long step within about a layer's
  // time. Empty: never interrupted. Called on the thread running the step.
  void set_interrupt(std::function<bool()> test) { interrupt_ = std::move(test); }
  void zero_grad();

  // The precision of every matmul of forward and backward (issue 28): fp32
  // (oneDNN's sgemm, the default) or bf16 (oneDNN's bf16 matmul, fp32
  // accumulation). In bf16 the matmuls read a bf16 copy of the parameters
  // (written by AdamW in its own pass: update_target) and the activations
  // that only a matmul reads are kept in bf16 alone: both LayerNorms' outputs
  // and attention's output; GELU's output is not kept but recomputed from its
  // fp32 input in backward. Everything else stays fp32: the master weights,
  // gradients, layernorm, attention, softmax, GELU, the residual stream and
  // the loss. Changing it re-lays out the activations (a forward must follow).
  // unavailable (unchanged) where oneDNN has no bf16 matmul; resource_exhausted
  // (unchanged) without memory; invalid_argument for `automatic` (the caller
  // resolves it: choose_precision).
  status set_precision(precision p);
  precision matmul_precision() const { return bf16_ ? precision::bf16 : precision::fp32; }

  // Where an optimizer writes this step's update: the parameters and, in
  // bf16, their bf16 copy (empty in fp32), which the caller promises to fill
  // with to_bf16 of every new value (adamw::step(..., bf16) does it in the
  // update's pass). Any other write goes through params()/param_views(),
  // which mark the copy stale: the next forward makes it afresh.
  struct update_target {
    std::span<float> params;
    std::span<std::uint16_t> bf16;
  };
  update_target params_for_update();
  // How many times a forward had to round the parameters to bf16 itself (the
  // copy was stale): once after set_precision or a write through params(),
  // never in a loop whose optimizer fills update_target().bf16.
  std::uint64_t bf16_param_copies() const { return bf16_copies_; }

  // Time spent per phase of forward and backward (issue 28's breakdown),
  // summed while profiling is on (off by default: no clock is read).
  enum class phase : int { encoder, layernorm, matmul, to_bf16, attention, gelu, residual, loss, count };
  static std::string_view phase_name(phase p);
  void set_profiling(bool on) { profiling_ = on; }
  void reset_phases() { phase_ms_ = {}; }
  double phase_ms(phase p) const { return phase_ms_[static_cast<int>(p)]; }

  // ---- Sequence-level losses (DPO, GRPO, reward models: services/trainer/align) ----
  // Per-token log p(target[b,t] | inputs[b,..t]) of the last forward() with
  // targets, into out (B,T): −(that token's cross-entropy), weights ignored.
  // Valid until the next forward (backward keeps them). REQUIRES: out.size()
  // == B·T and the last forward() had targets and succeeded.
  void token_logprobs(std::span<float> out) const;
  // The gradient of a loss J given dJ/dlogp (B,T) for every token's log p
  // (token_logprobs), backpropagated into grads() (accumulate = false
  // overwrites them). A masked token is a 0 in dlogp. invalid_argument for a
  // wrong size or a non-finite value; unavailable when interrupted.
  // REQUIRES: the last forward() had targets. Overwrites logits().
  status backward_from_token_grads(std::span<const float> dlogp, bool accumulate = true);
  // The backbone only: embeddings, blocks and the final LayerNorm, no LM head
  // (no (B,T,V) logits): hidden() then holds the (B,T,C) output of ln_f.
  // invalid_argument for wrong sizes or ids outside [0, V).
  status forward_hidden(std::span<const std::int32_t> inputs);
  // (B,T,C) output of ln_f of the last forward() or forward_hidden().
  std::span<const float> hidden() const;
  // Backpropagates dJ/dhidden (B,T,C) into grads() (the LM head gets no
  // gradient; accumulate = false overwrites). invalid_argument for a wrong
  // size; unavailable when interrupted. REQUIRES: a forward succeeded since
  // create() (backward() keeps the activations this needs).
  status backward_from_hidden(std::span<const float> dhidden, bool accumulate = true);

  std::span<float> params() {
    bf16_copy_current_ = false;  // a writer may change them: the bf16 copy is remade
    return params_.span();
  }
  std::span<const float> params() const { return params_.span(); }
  std::span<float> grads() { return grads_.span(); }
  std::span<const float> grads() const { return grads_.span(); }
  model::tensor_views param_views() {
    bf16_copy_current_ = false;
    return model::make_views(params_.data(), layout_);
  }
  model::tensor_views grad_views() { return model::make_views(grads_.data(), layout_); }
  const model::param_layout& layout() const { return layout_; }
  const model::gpt2_config& config() const { return cfg_; }
  // fp32 values held: parameters, gradients, activations and scratch
  // (libs/model/memory.hpp estimates the same from the shape).
  std::size_t allocated_floats() const { return params_.size() + grads_.size() + acts_.size() + scratch_.size(); }
  // Bytes held: allocated_floats()·4 plus, in bf16, the parameters' copy,
  // the bf16 activations and the matmuls' bf16 scratch.
  std::size_t allocated_bytes() const;
  int batch() const { return B_; }
  int seq_len() const { return T_; }
  // (B,T,Vp) logits of the last forward() (padding columns: logits of the
  // zero padding rows of wte). Valid until backward(), which overwrites them.
  std::span<const float> logits() const;

 private:
  gpt2() = default;
  struct acts;  // pointers into acts_, see model.cpp
  struct bf16_state;  // the bf16 copy of the parameters, scratch and the oneDNN primitives
  struct bf16_deleter {
    void operator()(bf16_state* s) const;
  };
  std::unique_ptr<bf16_state, bf16_deleter> bf16_;
  // The model's matmuls, in its precision (kernels::matmul_forward/_backward's
  // contracts); the *16 forms take an input already in bf16 (bf16 only).
  void mm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC);
  void mm_forward16(float* out, const std::uint16_t* inp, const float* weight, const float* bias, int N, int C,
                    int OC);
  void mm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                   const float* weight, int N, int C, int OC, bool accumulate);
  void mm_backward16(float* dinp, float* dweight, float* dbias, const float* dout, const std::uint16_t* inp,
                     const float* weight, int N, int C, int OC, bool accumulate);
  // An input that backward needs again: in bf16 it is rounded into `kept`
  // (its only copy, read back by mm_backward_kept); in fp32 `kept` is null and
  // inp itself is kept.
  void mm_forward_kept(float* out, const float* inp, std::uint16_t* kept, const float* weight, const float* bias,
                       int N, int C, int OC);
  void mm_backward_kept(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const std::uint16_t* kept, const float* weight, int N, int C, int OC, bool accumulate);
  void bf16_gemm_or_abort(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A,
                          const std::uint16_t* B, float* C, bool accumulate);
  acts views();
  model::tensor_views pviews() { return model::make_views(params_.data(), layout_); }  // no staleness mark
  void relayout();  // logits_, hidden_, losses_ after the activations moved
  bool bf16_copy_current_ = false;
  std::uint64_t bf16_copies_ = 0;
  bool profiling_ = false;
  std::array<double, static_cast<int>(phase::count)> phase_ms_{};
  friend struct phase_timer;

  model::gpt2_config cfg_;
  model::param_layout layout_;
  int B_ = 0, T_ = 0;
  float_buffer params_, grads_;
  float_buffer acts_;     // everything forward saves for backward
  float_buffer scratch_;  // backward's per-layer gradients, reused across layers
  std::unique_ptr<std::int32_t[]> inputs_, targets_;
  const float* logits_ = nullptr;  // inside acts_
  std::function<bool()> interrupt_;
  bool interrupted() const { return interrupt_ && interrupt_(); }
  status check_inputs(std::span<const std::int32_t> inputs) const;
  status forward_backbone();                // encoder, blocks, ln_f over inputs_
  bool backward_from_rows(bool accumulate);  // dlogits from row_scale, LM head, then the backbone
  bool backward_backbone(bool accumulate);   // from dlnf (in scratch) down to the embeddings
  const float* hidden_ = nullptr;  // inside acts_: ln_f's output (B,T,C)
  const float* losses_ = nullptr;  // inside acts_: per-token cross-entropy (B,T)
  float weight_sum_ = 0.0f;
  bool have_targets_ = false;
  bool have_backbone_ = false;  // a forward has filled the activations
};

}  // namespace loom::engine
