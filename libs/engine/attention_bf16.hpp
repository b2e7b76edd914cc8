// attention_bf16: causal self-attention with its four products per head in
// bf16 — scores Q·Kᵀ and values P·V forward; dP = dO·Vᵀ, dV = Pᵀ·dO, dQ = dS·K
// and dK = dSᵀ·Q backward — as batched oneDNN bf16 matmuls over every
// (batch, head) at once, fp32 accumulation (issue 28). The softmax and its
// backward are computed in fp32 (kernels::causal_softmax_*), the
// probabilities kept in bf16: the P that multiplies V is the one saved, so
// backward differentiates what forward computed. Otherwise
// kernels::attention_forward/_backward's contract: qkv (B,T,3C) holds
// q | k | v in NH heads of C/NH channels, p16 (B,NH,T,T) the softmax rows
// saved for backward (zeros above the diagonal), out (B,T,C); dqkv is
// overwritten. The full T×T
// score matrix is multiplied (the masked half too): at 10x fp32's speed that
// costs less than fp32's causal loop over half of it.
// Scratch is allocated once by make(); one thread calls it (OpenMP inside).
#pragma once

#include "libs/engine/bf16.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::engine {

class bf16_attention {
 public:
  // invalid_argument for a shape with a zero or C not a multiple of NH;
  // resource_exhausted when the scratch cannot be allocated.
  static result<bf16_attention> make(int B, int T, int C, int NH);
  void forward(float* out, std::uint16_t* p16, const float* qkv);
  void backward(float* dqkv, const float* dout, const float* qkv, const std::uint16_t* p16);
  // Bytes of scratch held (bf16 copies of q, k, v, dO and dS; the scores or dP and the products in fp32).
  std::size_t bytes() const;
  // What make() allocates for a shape, in values: bf16 and fp32 (libs/model/memory.hpp's estimate).
  static std::size_t bf16_values(int B, int T, int C, int NH);
  static std::size_t fp32_values(int B, int T, int C, int NH);

 private:
  bf16_attention() = default;
  // The heads of part (0 q, 1 k, 2 v) of a (B,T,stride) fp32 array, channel
  // offset `off`, rounded into (B·NH, T, hs) bf16; and (B·NH,T,hs) fp32 back.
  void pack(const float* src, std::size_t stride, std::size_t off, std::uint16_t* dst) const;
  void unpack(const float* src, float* dst, std::size_t stride, std::size_t off) const;
  void gemm(bool ta, bool tb, int M, int N, int K, const std::uint16_t* A, const std::uint16_t* B, float* C);
  int B_ = 0, T_ = 0, C_ = 0, NH_ = 0, hs_ = 0;
  bf16_gemm gemm_;
  std::vector<std::uint16_t> q_, k_, v_, d_, p_;  // (BH,T,hs) ×4, dS (BH,T,T)
  std::vector<float> dp_, o_;                      // (BH,T,T), 3 × (BH,T,hs)
};

}  // namespace loom::engine
