// model_internal: what model.cpp, model_matmul.cpp and model_backward.cpp share inside gpt2 —
// the activations' layout (acts),
// the bf16 state (the parameters' copy, bf16 activations, scratch, oneDNN's
// primitives) and the phase profile's timer. Not for other includes.
#pragma once

#include "libs/engine/attention_bf16.hpp"
#include "libs/engine/bf16.hpp"
#include "libs/engine/model.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <vector>

namespace loom::engine {

using clk = std::chrono::steady_clock;

// Where each activation lives. Per-layer arrays have a leading L dimension.
struct gpt2::acts {
  std::size_t BT, C, C3, C4, att_per_layer;
  float* x0;                        // (B,T,C) embeddings
  float *ln1, *ln1_mean, *ln1_rstd; // (L,B,T,C), (L,B,T) ×2
  float* qkv;                       // (L,B,T,3C)
  float* att;                       // (L,B,NH,T,T)
  float* atty;                      // (L,B,T,C) attention output before projection
  float* x1;                        // (L,B,T,C) residual after attention
  float *ln2, *ln2_mean, *ln2_rstd; // (L,B,T,C), (L,B,T) ×2
  float* fch;                       // (L,B,T,4C) before GELU
  float* fchg;                      // (L,B,T,4C) after GELU
  float* x2;                        // (L,B,T,C) residual after MLP = block output
  float *lnf, *lnf_mean, *lnf_rstd; // (B,T,C), (B,T) ×2
  float* logits;                    // (B,T,Vp); dlogits in place during backward
  float *losses, *lse, *weights, *row_scale;  // (B,T) each
  // scratch_
  float* tmp;    // (B,T,C) projection output before the residual add
  float* dres;   // (B,T,C) gradient of the residual stream
  float* dbtc;   // (B,T,C) dlnf / dln2 / datty / dln1, one at a time
  float* dqkv;   // (B,T,3C)
  float* dfch;   // (B,T,4C) dfchg, then dfch in place
  float* datt;   // (B,NH,T) attention backward rows
  // bf16 (set_precision): ln1, ln2, atty and att are kept only here, in bf16 (their
  // fp32 pointers above are null, as is fchg: recomputed in backward).
  std::uint16_t *ln1h, *ln2h, *attyh;  // (L,B,T,C) each
  std::uint16_t* atth;                  // (L,B,NH,T,T): attention's probabilities (att is null)

  // Layer l of a per-layer array; null for an array this precision does not hold.
  float* layer(float* base, std::size_t per_layer, int l) const { return base ? base + per_layer * l : nullptr; }
  std::uint16_t* layer(std::uint16_t* base, std::size_t per_layer, int l) const {
    return base ? base + per_layer * l : nullptr;
  }
};

// Adds a phase's time to the model's profile while profiling is on.
struct phase_timer {
  gpt2& m;
  int ph;
  clk::time_point t0{};
  phase_timer(gpt2& model, gpt2::phase p) : m(model), ph(static_cast<int>(p)) {
    if (m.profiling_) t0 = clk::now();
  }
  ~phase_timer() {
    if (m.profiling_) m.phase_ms_[ph] += std::chrono::duration<double, std::milli>(clk::now() - t0).count();
  }
  phase_timer(const phase_timer&) = delete;
  phase_timer& operator=(const phase_timer&) = delete;
};

struct gpt2::bf16_state {
  bf16_gemm gemm;
  // The parameters' bf16 copy; the matmuls' bf16 scratch (an input or a
  // dout: a, and an input of a weight gradient: b); the bf16 activations.
  std::vector<std::uint16_t> params, a, b, acts;
  std::size_t lm_cols = 0;  // LM head backward: vocabulary columns per piece (fits a)
  std::optional<bf16_attention> attn;  // attention's products in bf16
};
}  // namespace loom::engine
