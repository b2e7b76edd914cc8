#include "libs/engine/attention_bf16.hpp"

#include "libs/engine/kernels.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>

namespace loom::engine {

std::size_t bf16_attention::bf16_values(int B, int T, int C, int NH) {
  return 4 * std::size_t(B) * T * C + std::size_t(B) * NH * T * T;
}
std::size_t bf16_attention::fp32_values(int B, int T, int C, int NH) {
  return std::size_t(B) * NH * T * T + 3 * std::size_t(B) * T * C;
}

result<bf16_attention> bf16_attention::make(int B, int T, int C, int NH) {
  if (B < 1 || T < 1 || C < 1 || NH < 1 || C % NH != 0)
    return make_error(errc::invalid_argument, "bf16_attention: B, T, C, NH must be >= 1 and C a multiple of NH, got " +
                                                  std::to_string(B) + ", " + std::to_string(T) + ", " +
                                                  std::to_string(C) + ", " + std::to_string(NH));
  bf16_attention a;
  a.B_ = B;
  a.T_ = T;
  a.C_ = C;
  a.NH_ = NH;
  a.hs_ = C / NH;
  const std::size_t heads = std::size_t(B) * T * C, scores = std::size_t(B) * NH * T * T;
  try {
    for (auto* v : {&a.q_, &a.k_, &a.v_, &a.d_}) v->resize(heads);
    a.p_.resize(scores);
    a.dp_.resize(scores);
    a.o_.resize(3 * heads);
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted,
                      "bf16_attention: cannot allocate " +
                          std::to_string((2 * (4 * heads + scores) + 4 * (scores + 3 * heads)) >> 20) +
                          " MiB of scratch");
  }
  return a;
}

std::size_t bf16_attention::bytes() const {
  return 2 * (q_.size() + k_.size() + v_.size() + d_.size() + p_.size()) + 4 * (dp_.size() + o_.size()) +
         gemm_.scratchpad_bytes();
}

void bf16_attention::pack(const float* src, std::size_t stride, std::size_t off, std::uint16_t* dst) const {
  const int B = B_, T = T_, NH = NH_, hs = hs_;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      const float* row = src + (std::size_t(b) * T + t) * stride + off;
      for (int h = 0; h < NH; ++h) {
        std::uint16_t* d = dst + ((std::size_t(b) * NH + h) * T + t) * hs;
        for (int i = 0; i < hs; ++i) d[i] = to_bf16(row[h * hs + i]);
      }
    }
}

void bf16_attention::unpack(const float* src, float* dst, std::size_t stride, std::size_t off) const {
  const int B = B_, T = T_, NH = NH_, hs = hs_;
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t) {
      float* row = dst + (std::size_t(b) * T + t) * stride + off;
      for (int h = 0; h < NH; ++h) {
        const float* s = src + ((std::size_t(b) * NH + h) * T + t) * hs;
        for (int i = 0; i < hs; ++i) row[h * hs + i] = s[i];
      }
    }
}

void bf16_attention::gemm(bool ta, bool tb, int M, int N, int K, const std::uint16_t* A, const std::uint16_t* B,
                          float* C) {
  if (auto st = gemm_.run_batched(std::size_t(B_) * NH_, ta, tb, M, N, K, A, B, C, false); !st) {
    std::fprintf(stderr, "bf16_attention: %s\n", st.err().message.c_str());
    std::abort();  // the model made this only where oneDNN has a bf16 matmul: a broken invariant
  }
}

void bf16_attention::forward(float* out, std::uint16_t* p16, const float* qkv) {
  const int T = T_, hs = hs_;
  const std::size_t C3 = 3 * std::size_t(C_), scores = std::size_t(B_) * NH_ * T * T;
  pack(qkv, C3, 0, q_.data());
  pack(qkv, C3, C_, k_.data());
  pack(qkv, C3, 2 * std::size_t(C_), v_.data());
  float* s = dp_.data();
  gemm(false, true, T, T, hs, q_.data(), k_.data(), s);  // S = Q·Kᵀ: K (T×hs) is Kᵀ's layout
  kernels::causal_softmax_forward(s, B_ * NH_, T, 1.0f / std::sqrt(float(hs)));
  to_bf16_parallel(s, p16, scores);  // P, saved for backward
  gemm(false, false, T, hs, T, p16, v_.data(), o_.data());  // O = P·V
  unpack(o_.data(), out, C_, 0);
}

void bf16_attention::backward(float* dqkv, const float* dout, const float* qkv, const std::uint16_t* p16) {
  const int T = T_, hs = hs_;
  const std::size_t C3 = 3 * std::size_t(C_), scores = std::size_t(B_) * NH_ * T * T;
  const std::size_t heads = std::size_t(B_) * T * C_;
  pack(qkv, C3, 0, q_.data());
  pack(qkv, C3, C_, k_.data());
  pack(qkv, C3, 2 * std::size_t(C_), v_.data());
  pack(dout, C_, 0, d_.data());
  float* dq = o_.data();
  float* dk = dq + heads;
  float* dv = dk + heads;
  gemm(true, false, T, hs, T, p16, d_.data(), dv);  // dV = Pᵀ·dO
  gemm(false, true, T, T, hs, d_.data(), v_.data(), dp_.data());  // dP = dO·Vᵀ
  kernels::causal_softmax_backward_bf16p(dp_.data(), p16, dp_.data(), B_ * NH_, T, 1.0f / std::sqrt(float(hs)));
  to_bf16_parallel(dp_.data(), p_.data(), scores);  // dS
  gemm(false, false, T, hs, T, p_.data(), k_.data(), dq);  // dQ = dS·K
  gemm(true, false, T, hs, T, p_.data(), q_.data(), dk);   // dK = dSᵀ·Q
  unpack(dq, dqkv, C3, 0);
  unpack(dk, dqkv, C3, C_);
  unpack(dv, dqkv, C3, 2 * std::size_t(C_));
}

}  // namespace loom::engine
