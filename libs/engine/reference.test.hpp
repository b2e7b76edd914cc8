// Test-only float64 reference of every GPT-2 op and of the whole model's loss:
// naive loops written straight from the formulas, independent of kernels.cpp,
// plus central finite differences and error measures for the gradient checks.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "libs/model/gpt_config.hpp"

namespace loom::engine::ref {

using vec = std::vector<double>;

inline void encoder(vec& out, const std::vector<std::int32_t>& tok, const double* wte,
                    const double* wpe, int B, int T, int C) {
  out.assign(std::size_t(B) * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c)
        out[(b * T + t) * C + c] = wte[tok[b * T + t] * C + c] + wpe[t * C + c];
}

inline void layernorm(vec& out, const vec& x, const double* w, const double* bias, int N, int C) {
  out.assign(x.size(), 0.0);
  for (int i = 0; i < N; ++i) {
    double m = 0, v = 0;
    for (int c = 0; c < C; ++c) m += x[i * C + c];
    m /= C;
    for (int c = 0; c < C; ++c) v += (x[i * C + c] - m) * (x[i * C + c] - m);
    v /= C;
    const double r = 1.0 / std::sqrt(v + 1e-5);
    for (int c = 0; c < C; ++c) out[i * C + c] = (x[i * C + c] - m) * r * w[c] + bias[c];
  }
}

// out (N,OC) = x (N,C) · w (OC,C)ᵀ + bias
inline void matmul(vec& out, const vec& x, const double* w, const double* bias, int N, int C,
                   int OC) {
  out.assign(std::size_t(N) * OC, 0.0);
  for (int i = 0; i < N; ++i)
    for (int o = 0; o < OC; ++o) {
      double s = bias ? bias[o] : 0.0;
      for (int c = 0; c < C; ++c) s += x[i * C + c] * w[o * C + c];
      out[i * OC + o] = s;
    }
}

inline void attention(vec& out, const vec& qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  out.assign(std::size_t(B) * T * C, 0.0);
  std::vector<double> a(T);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < NH; ++h)
      for (int t = 0; t < T; ++t) {
        double mx = -1e300, sum = 0;
        for (int t2 = 0; t2 <= t; ++t2) {
          double s = 0;
          for (int i = 0; i < hs; ++i)
            s += qkv[(b * T + t) * 3 * C + h * hs + i] * qkv[(b * T + t2) * 3 * C + C + h * hs + i];
          a[t2] = s / std::sqrt(double(hs));
          mx = std::max(mx, a[t2]);
        }
        for (int t2 = 0; t2 <= t; ++t2) sum += (a[t2] = std::exp(a[t2] - mx));
        for (int t2 = 0; t2 <= t; ++t2)
          for (int i = 0; i < hs; ++i)
            out[(b * T + t) * C + h * hs + i] +=
                a[t2] / sum * qkv[(b * T + t2) * 3 * C + 2 * C + h * hs + i];
      }
}

inline double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}

// Σ w·(lse - z[target]) / Σ w over rows of logits (N,Vp), first V columns.
inline double weighted_xent(const vec& z, const std::vector<std::int32_t>& tgt,
                            const std::vector<float>& w, int N, int V, int Vp) {
  double num = 0, den = 0;
  for (int i = 0; i < N; ++i) {
    double mx = -1e300, s = 0;
    for (int v = 0; v < V; ++v) mx = std::max(mx, z[i * Vp + v]);
    for (int v = 0; v < V; ++v) s += std::exp(z[i * Vp + v] - mx);
    num += w[i] * (mx + std::log(s) - z[i * Vp + tgt[i]]);
    den += w[i];
  }
  return num / den;
}

// The whole GPT-2 loss in float64, parameters laid out by model::make_param_layout.
inline double gpt2_loss(const vec& params, const model::gpt2_config& cfg, int B, int T,
                        const std::vector<std::int32_t>& in, const std::vector<std::int32_t>& tgt,
                        const std::vector<float>& w) {
  const model::param_layout lay = model::make_param_layout(cfg);
  auto P = [&](model::tensor_id t) { return params.data() + lay.offset(t); };
  const int C = cfg.channels, N = B * T;
  vec x, ln, qkv, y, proj, h;
  encoder(x, in, P(model::tensor_id::wte), P(model::tensor_id::wpe), B, T, C);
  for (int l = 0; l < cfg.layers; ++l) {
    layernorm(ln, x, P(model::tensor_id::ln1w) + l * C, P(model::tensor_id::ln1b) + l * C, N, C);
    matmul(qkv, ln, P(model::tensor_id::qkvw) + l * 3 * C * C, P(model::tensor_id::qkvb) + l * 3 * C, N, C, 3 * C);
    attention(y, qkv, B, T, C, cfg.heads);
    matmul(proj, y, P(model::tensor_id::attprojw) + l * C * C, P(model::tensor_id::attprojb) + l * C, N, C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    layernorm(ln, x, P(model::tensor_id::ln2w) + l * C, P(model::tensor_id::ln2b) + l * C, N, C);
    matmul(h, ln, P(model::tensor_id::fcw) + l * 4 * C * C, P(model::tensor_id::fcb) + l * 4 * C, N, C, 4 * C);
    for (double& v : h) v = gelu(v);
    matmul(proj, h, P(model::tensor_id::fcprojw) + l * 4 * C * C, P(model::tensor_id::fcprojb) + l * C, N, 4 * C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
  }
  layernorm(ln, x, P(model::tensor_id::lnfw), P(model::tensor_id::lnfb), N, C);
  vec logits;
  matmul(logits, ln, P(model::tensor_id::wte), nullptr, N, C, cfg.padded_vocab);
  return weighted_xent(logits, tgt, w, N, cfg.vocab, cfg.padded_vocab);
}

// d f / d x[i] for every i by central differences, step eps.
inline vec numeric_grad(vec& x, const std::function<double()>& f, double eps = 1e-5) {
  vec g(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double keep = x[i];
    x[i] = keep + eps;
    const double fp = f();
    x[i] = keep - eps;
    const double fm = f();
    x[i] = keep;
    g[i] = (fp - fm) / (2 * eps);
  }
  return g;
}

// ‖analytic − numeric‖₂ / ‖numeric‖₂ (0 when both are 0).
template <class A>
double rel_error(const A& analytic, const vec& numeric) {
  double d = 0, n = 0;
  for (std::size_t i = 0; i < numeric.size(); ++i) {
    d += (double(analytic[i]) - numeric[i]) * (double(analytic[i]) - numeric[i]);
    n += numeric[i] * numeric[i];
  }
  return n == 0 ? std::sqrt(d) : std::sqrt(d / n);
}

// Fixed-seed values in [lo, hi), rounded to float so both sides see the same numbers.
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline vec to_double(const std::vector<float>& v) { return vec(v.begin(), v.end()); }

}  // namespace loom::engine::ref
