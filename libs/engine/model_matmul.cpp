// The model's matmuls in its precision (model.hpp: set_precision): oneDNN's
// sgemm in fp32; in bf16 its bf16 matmul on the parameters' bf16 copy, inputs
// rounded to bf16 as they enter (or stored so: the *16 forms).
#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/model_internal.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace loom::engine {
namespace k = kernels;

gpt2::update_target gpt2::params_for_update() {
  update_target t{params_.span(), {}};
  if (bf16_) {
    t.bf16 = std::span<std::uint16_t>(bf16_->params);
    bf16_copy_current_ = true;  // the caller fills both
  } else {
    bf16_copy_current_ = false;
  }
  return t;
}

void gpt2::bf16_gemm_or_abort(bool ta, bool tb, std::size_t M, std::size_t N, std::size_t K, const std::uint16_t* A,
                              const std::uint16_t* B, float* C, bool accumulate) {
  phase_timer t(*this, phase::matmul);
  if (auto st = bf16_->gemm.run(ta, tb, M, N, K, A, B, C, accumulate); !st) {
    std::fprintf(stderr, "gpt2: %s\n", st.err().message.c_str());
    std::abort();  // set_precision made a bf16 matmul here: a shape it cannot do is a broken invariant
  }
}

void gpt2::mm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  if (!bf16_) {
    phase_timer t(*this, phase::matmul);
    return k::matmul_forward(out, inp, weight, bias, N, C, OC);
  }
  {
    phase_timer t(*this, phase::to_bf16);
    to_bf16_parallel(inp, bf16_->a.data(), std::size_t(N) * C);
  }
  mm_forward16(out, bf16_->a.data(), weight, bias, N, C, OC);
}

void gpt2::mm_forward16(float* out, const std::uint16_t* inp, const float* weight, const float* bias, int N, int C,
                        int OC) {
  // out (N×OC) = inp (N×C) · Wᵀ, W stored OC×C: op(B) = Wᵀ, a layout, not a copy.
  const std::uint16_t* w = bf16_->params.data() + (weight - params_.data());
  bf16_gemm_or_abort(false, true, N, OC, C, inp, w, out, false);
  if (!bias) return;
  phase_timer t(*this, phase::matmul);
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    float* o = out + std::size_t(i) * OC;
    for (int j = 0; j < OC; ++j) o[j] += bias[j];
  }
}

void gpt2::mm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC, bool accumulate) {
  if (!bf16_) {
    phase_timer t(*this, phase::matmul);
    return k::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate);
  }
  {
    phase_timer t(*this, phase::to_bf16);
    to_bf16_parallel(inp, bf16_->b.data(), std::size_t(N) * C);
  }
  if (std::size_t(N) * OC <= bf16_->a.size())
    return mm_backward16(dinp, dweight, dbias, dout, bf16_->b.data(), weight, N, C, OC, accumulate);
  // A wide output (the LM head: OC = Vp) in pieces of lm_cols columns j0..j1:
  //   dinp (N×C) (+)= dout[:, j0:j1] · W[j0:j1, :]   (the first piece writes)
  //   dW[j0:j1, :] (+)= dout[:, j0:j1]ᵀ · inp          (each row of dW once)
  const std::size_t cols = bf16_->lm_cols;
  for (std::size_t j0 = 0; j0 < std::size_t(OC); j0 += cols) {
    const std::size_t n = std::min(cols, std::size_t(OC) - j0);
    std::uint16_t* d16 = bf16_->a.data();
    {
      phase_timer t(*this, phase::to_bf16);
#pragma omp parallel for schedule(static)
      for (int i = 0; i < N; ++i) {
        const float* src = dout + std::size_t(i) * OC + j0;
        std::uint16_t* dst = d16 + std::size_t(i) * n;
        for (std::size_t j = 0; j < n; ++j) dst[j] = to_bf16(src[j]);
      }
    }
    const std::uint16_t* w = bf16_->params.data() + (weight - params_.data()) + j0 * C;
    bf16_gemm_or_abort(false, false, N, C, n, d16, w, dinp, j0 > 0);
    bf16_gemm_or_abort(true, false, n, C, N, d16, bf16_->b.data(), dweight + j0 * C, accumulate);
  }
  if (dbias) {
    phase_timer t(*this, phase::matmul);
    k::bias_backward(dbias, dout, N, OC, accumulate);
  }
}

void gpt2::mm_backward16(float* dinp, float* dweight, float* dbias, const float* dout, const std::uint16_t* inp,
                         const float* weight, int N, int C, int OC, bool accumulate) {
  {
    phase_timer t(*this, phase::to_bf16);
    to_bf16_parallel(dout, bf16_->a.data(), std::size_t(N) * OC);
  }
  const std::uint16_t* w = bf16_->params.data() + (weight - params_.data());
  // dinp (N×C) = dout (N×OC) · W (OC×C); dW (OC×C) (+)= doutᵀ · inp, doutᵀ a layout.
  bf16_gemm_or_abort(false, false, N, C, OC, bf16_->a.data(), w, dinp, false);
  bf16_gemm_or_abort(true, false, OC, C, N, bf16_->a.data(), inp, dweight, accumulate);
  if (dbias) {
    phase_timer t(*this, phase::matmul);
    k::bias_backward(dbias, dout, N, OC, accumulate);
  }
}

void gpt2::mm_forward_kept(float* out, const float* inp, std::uint16_t* kept, const float* weight, const float* bias,
                           int N, int C, int OC) {
  if (!bf16_) return mm_forward(out, inp, weight, bias, N, C, OC);
  {
    phase_timer t(*this, phase::to_bf16);
    to_bf16_parallel(inp, kept, std::size_t(N) * C);
  }
  mm_forward16(out, kept, weight, bias, N, C, OC);
}

void gpt2::mm_backward_kept(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                            const std::uint16_t* kept, const float* weight, int N, int C, int OC, bool accumulate) {
  if (bf16_) return mm_backward16(dinp, dweight, dbias, dout, kept, weight, N, C, OC, accumulate);
  mm_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate);
}

}  // namespace loom::engine
