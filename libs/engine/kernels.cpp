#include "libs/engine/kernels.hpp"
#include "libs/engine/bf16.hpp"

#include <omp.h>
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace loom::engine::kernels {
namespace {

// Column blocks for parameter-gradient reductions: each thread owns whole
// columns and walks the rows in order, so the sum order never depends on the
// thread count. 64 floats = one 256-byte stretch of a row per block.
constexpr int col_block = 64;

inline float exp_fast(float x) {
  // exp(x) = 2^n · exp(r), n = round(x / ln2), |r| <= ln2/2; degree-7 Taylor
  // polynomial for exp(r) (truncation < 5e-9 relative).
  x = std::min(std::max(x, -87.0f), 88.0f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.42860682030941723e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(n) + 127) << 23;
  return p * std::bit_cast<float>(bits);
}

void sgemm(char ta, char tb, int M, int N, int K, const float* A, int lda, const float* B,
           int ldb, float beta, float* Cm, int ldc) {
  const dnnl_status_t st = dnnl_sgemm(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, Cm, ldc);
  if (st != dnnl_success) {
    // Only reachable through a shape bug in this file: a broken invariant.
    std::fprintf(stderr, "%s:%d: dnnl_sgemm(%c,%c,M=%d,N=%d,K=%d) failed with status %d\n",
                 __FILE__, __LINE__, ta, tb, M, N, K, static_cast<int>(st));
    std::abort();
  }
}

// GELU (tanh form) via 0.5·(1 + tanh(u)) = sigmoid(2u), u = √(2/π)(x + 0.044715x³).
constexpr float gelu_k = 0.7978845608028654f;  // √(2/π)
constexpr float gelu_a = 0.044715f;

}  // namespace

float exp_approx(float x) { return exp_fast(x); }

void set_threads(int n) { omp_set_num_threads(n); }
int threads() { return omp_get_max_threads(); }

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                     int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; ++bt) {
    const float* e = wte + std::size_t(tokens[bt]) * C;
    const float* p = wpe + std::size_t(bt % T) * C;
    float* o = out + std::size_t(bt) * C;
    for (int c = 0; c < C; ++c) o[c] = e[c] + p[c];
  }
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens,
                      int B, int T, int C, bool accumulate) {
  if (!accumulate) std::memset(dwpe, 0, sizeof(float) * std::size_t(T) * C);
  const int nblocks = (C + col_block - 1) / col_block;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; ++blk) {
    const int c0 = blk * col_block, c1 = std::min(C, c0 + col_block);
    for (int bt = 0; bt < B * T; ++bt) {
      const float* d = dout + std::size_t(bt) * C;
      float* e = dwte + std::size_t(tokens[bt]) * C;
      float* p = dwpe + std::size_t(bt % T) * C;
      for (int c = c0; c < c1; ++c) {
        e[c] += d[c];
        p[c] += d[c];
      }
    }
  }
}

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp,
                       const float* weight, const float* bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + std::size_t(i) * C;
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int c = 0; c < C; ++c) s += x[c];
    const float m = s / C;
    float v = 0.0f;
#pragma omp simd reduction(+ : v)
    for (int c = 0; c < C; ++c) v += (x[c] - m) * (x[c] - m);
    const float r = 1.0f / std::sqrt(v / C + 1e-5f);
    float* o = out + std::size_t(i) * C;
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * r * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = r;
  }
}

void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                        const float* inp, const float* weight, const float* mean,
                        const float* rstd, int N, int C, bool accumulate) {
  // Pass 1, rows in parallel: dx = rstd·(dn - mean(dn) - n·mean(dn·n)), dn = w·dout.
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* x = inp + std::size_t(i) * C;
    const float* dy = dout + std::size_t(i) * C;
    const float m = mean[i], r = rstd[i];
    float sum_dn = 0.0f, sum_dn_n = 0.0f;
#pragma omp simd reduction(+ : sum_dn, sum_dn_n)
    for (int c = 0; c < C; ++c) {
      const float dn = weight[c] * dy[c];
      sum_dn += dn;
      sum_dn_n += dn * (x[c] - m) * r;
    }
    sum_dn /= C;
    sum_dn_n /= C;
    float* dx = dinp + std::size_t(i) * C;
    for (int c = 0; c < C; ++c) {
      const float n = (x[c] - m) * r;
      dx[c] += r * (weight[c] * dy[c] - sum_dn - n * sum_dn_n);
    }
  }
  // Pass 2, columns in parallel: parameter gradients summed over rows in order.
  const int nblocks = (C + col_block - 1) / col_block;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; ++blk) {
    const int c0 = blk * col_block, c1 = std::min(C, c0 + col_block);
    if (!accumulate)
      for (int c = c0; c < c1; ++c) dweight[c] = dbias[c] = 0.0f;
    for (int i = 0; i < N; ++i) {
      const float* x = inp + std::size_t(i) * C;
      const float* dy = dout + std::size_t(i) * C;
      const float m = mean[i], r = rstd[i];
      for (int c = c0; c < c1; ++c) {
        dweight[c] += (x[c] - m) * r * dy[c];
        dbias[c] += dy[c];
      }
    }
  }
}

void matmul_forward(float* out, const float* inp, const float* weight, const float* bias,
                    int N, int C, int OC) {
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int i = 0; i < N; ++i) std::memcpy(out + std::size_t(i) * OC, bias, sizeof(float) * OC);
    beta = 1.0f;
  }
  // Row-major: out (N×OC) = inp (N×C) · weightᵀ, weight stored OC×C.
  sgemm('N', 'T', N, OC, C, inp, C, weight, C, beta, out, OC);
}

void matmul_backward(float* dinp, float* dweight, float* dbias, const float* dout,
                     const float* inp, const float* weight, int N, int C, int OC,
                     bool accumulate) {
  sgemm('N', 'N', N, C, OC, dout, OC, weight, C, 0.0f, dinp, C);  // dinp = dout·W
  sgemm('T', 'N', OC, C, N, dout, OC, inp, C, accumulate ? 1.0f : 0.0f, dweight, C);  // dW (+)= doutᵀ·inp
  if (dbias) bias_backward(dbias, dout, N, OC, accumulate);
}

void bias_backward(float* dbias, const float* dout, int N, int OC, bool accumulate) {
  const int nblocks = (OC + col_block - 1) / col_block;
#pragma omp parallel for schedule(static)
  for (int blk = 0; blk < nblocks; ++blk) {
    const int o0 = blk * col_block, o1 = std::min(OC, o0 + col_block);
    if (!accumulate)
      for (int o = o0; o < o1; ++o) dbias[o] = 0.0f;
    for (int i = 0; i < N; ++i) {
      const float* d = dout + std::size_t(i) * OC;
      for (int o = o0; o < o1; ++o) dbias[o] += d[o];
    }
  }
}

void attention_forward(float* out, float* att, const float* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  const std::size_t C3 = std::size_t(3) * C;
#pragma omp parallel for collapse(3) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        const float* q = qkv + (std::size_t(b) * T + t) * C3 + h * hs;
        float* a = att + ((std::size_t(b) * NH + h) * T + t) * T;
        float mx = -INFINITY;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* k = qkv + (std::size_t(b) * T + t2) * C3 + C + h * hs;
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int i = 0; i < hs; ++i) s += q[i] * k[i];
          a[t2] = s * scale;
          mx = std::max(mx, a[t2]);
        }
        float sum = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          a[t2] = exp_fast(a[t2] - mx);
          sum += a[t2];
        }
        const float inv = 1.0f / sum;
        for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
        for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
        float* o = out + (std::size_t(b) * T + t) * C + h * hs;
        for (int i = 0; i < hs; ++i) o[i] = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (std::size_t(b) * T + t2) * C3 + 2 * C + h * hs;
          for (int i = 0; i < hs; ++i) o[i] += a[t2] * v[i];
        }
      }
}

void causal_softmax_forward(float* s, int BH, int T, float scale) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int bh = 0; bh < BH; ++bh)
    for (int t = 0; t < T; ++t) {
      float* a = s + (std::size_t(bh) * T + t) * T;
      float mx = -INFINITY;
      for (int t2 = 0; t2 <= t; ++t2) mx = std::max(mx, a[t2] * scale);
      float sum = 0.0f;
      for (int t2 = 0; t2 <= t; ++t2) {
        a[t2] = exp_fast(a[t2] * scale - mx);
        sum += a[t2];
      }
      const float inv = 1.0f / sum;
      for (int t2 = 0; t2 <= t; ++t2) a[t2] *= inv;
      for (int t2 = t + 1; t2 < T; ++t2) a[t2] = 0.0f;
    }
}

void causal_softmax_backward_bf16p(float* ds, const std::uint16_t* p, const float* dp, int BH, int T, float scale) {
#pragma omp parallel for collapse(2) schedule(static)
  for (int bh = 0; bh < BH; ++bh)
    for (int t = 0; t < T; ++t) {
      const std::size_t row = (std::size_t(bh) * T + t) * T;
      const std::uint16_t* a = p + row;
      const float* g = dp + row;
      float* d = ds + row;
      float dot = 0.0f;
      for (int t2 = 0; t2 <= t; ++t2) dot += from_bf16(a[t2]) * g[t2];
      for (int t2 = 0; t2 <= t; ++t2) d[t2] = scale * from_bf16(a[t2]) * (g[t2] - dot);
      for (int t2 = t + 1; t2 < T; ++t2) d[t2] = 0.0f;
    }
}

void attention_backward(float* dqkv, float* scratch, const float* dout, const float* qkv,
                        const float* att, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const float scale = 1.0f / std::sqrt(float(hs));
  const std::size_t C3 = std::size_t(3) * C;
  // One (b, h) per task: it alone writes its head's slices of dq, dk, dv.
#pragma omp parallel for collapse(2) schedule(static)
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h) {
      float* datt = scratch + (std::size_t(b) * NH + h) * T;
      for (int t = 0; t < T; ++t)
        for (int part = 0; part < 3; ++part)
          std::memset(dqkv + (std::size_t(b) * T + t) * C3 + part * C + h * hs, 0,
                      sizeof(float) * hs);
      for (int t = 0; t < T; ++t) {
        const float* a = att + ((std::size_t(b) * NH + h) * T + t) * T;
        const float* dy = dout + (std::size_t(b) * T + t) * C + h * hs;
        const float* q = qkv + (std::size_t(b) * T + t) * C3 + h * hs;
        float* dq = dqkv + (std::size_t(b) * T + t) * C3 + h * hs;
        // datt[t2] = dy·v[t2]; dv[t2] += a[t2]·dy
        float dot = 0.0f;
        for (int t2 = 0; t2 <= t; ++t2) {
          const float* v = qkv + (std::size_t(b) * T + t2) * C3 + 2 * C + h * hs;
          float* dv = dqkv + (std::size_t(b) * T + t2) * C3 + 2 * C + h * hs;
          float s = 0.0f;
#pragma omp simd reduction(+ : s)
          for (int i = 0; i < hs; ++i) s += dy[i] * v[i];
          for (int i = 0; i < hs; ++i) dv[i] += a[t2] * dy[i];
          datt[t2] = s;
          dot += a[t2] * s;
        }
        // softmax backward, then through the scaled dot product q·k.
        for (int t2 = 0; t2 <= t; ++t2) {
          const float dpre = a[t2] * (datt[t2] - dot) * scale;
          const float* k = qkv + (std::size_t(b) * T + t2) * C3 + C + h * hs;
          float* dk = dqkv + (std::size_t(b) * T + t2) * C3 + C + h * hs;
          for (int i = 0; i < hs; ++i) {
            dq[i] += dpre * k[i];
            dk[i] += dpre * q[i];
          }
        }
      }
    }
}

void gelu_forward(float* out, const float* inp, std::size_t n) {
  const long nn = static_cast<long>(n);
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < nn; ++i) {
    const float x = inp[i];
    const float u = gelu_k * (x + gelu_a * x * x * x);
    out[i] = x / (1.0f + exp_fast(-2.0f * u));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::size_t n) {
  const long nn = static_cast<long>(n);
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < nn; ++i) {
    const float x = inp[i];
    const float u = gelu_k * (x + gelu_a * x * x * x);
    const float s = 1.0f / (1.0f + exp_fast(-2.0f * u));  // = 0.5·(1 + tanh u)
    const float du = gelu_k * (1.0f + 3.0f * gelu_a * x * x);
    dinp[i] = (s + 2.0f * x * s * (1.0f - s) * du) * dout[i];
  }
}

void residual_forward(float* out, const float* a, const float* b, std::size_t n) {
  const long nn = static_cast<long>(n);
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < nn; ++i) out[i] = a[i] + b[i];
}

void residual_backward(float* da, float* db, const float* dout, std::size_t n) {
  const long nn = static_cast<long>(n);
#pragma omp parallel for simd schedule(static)
  for (long i = 0; i < nn; ++i) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}

void crossentropy_forward(float* losses, float* lse, const float* logits,
                          const std::int32_t* targets, int N, int V, int Vp) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* z = logits + std::size_t(i) * Vp;
    float mx = -INFINITY;
#pragma omp simd reduction(max : mx)
    for (int v = 0; v < V; ++v) mx = std::max(mx, z[v]);
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (int v = 0; v < V; ++v) s += exp_fast(z[v] - mx);
    lse[i] = mx + std::log(s);
    losses[i] = lse[i] - z[targets[i]];
  }
}

void crossentropy_backward(float* dlogits, const float* logits, const float* lse,
                           const std::int32_t* targets, const float* row_scale, int N, int V,
                           int Vp) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    const float* z = logits + std::size_t(i) * Vp;
    float* d = dlogits + std::size_t(i) * Vp;
    const float l = lse[i], sc = row_scale[i];
    const float zt = z[targets[i]];  // read before the row may be overwritten in place
#pragma omp simd
    for (int v = 0; v < V; ++v) d[v] = sc * exp_fast(z[v] - l);
    d[targets[i]] = sc * (exp_fast(zt - l) - 1.0f);
    for (int v = V; v < Vp; ++v) d[v] = 0.0f;
  }
}

}  // namespace loom::engine::kernels
