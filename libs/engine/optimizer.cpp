#include "libs/engine/optimizer.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

namespace loom::engine {

adamw::adamw(std::size_t num_params, adamw_config cfg, std::vector<model::param_range> ranges)
    : cfg_(cfg), ranges_(std::move(ranges)), m_(num_params), v_(num_params) {}

namespace {

// One range of the update; with bf16 != nullptr also its bf16 rounding. A
// template so the fp32-only loop carries no branch and both vectorise.
template <bool with_copy>
void update_range(float* p, const float* g, float* m, float* v, std::uint16_t* bf16, long begin, long end,
                  float b1, float b2, float c1, float c2, float eps, float lr, float decay, float grad_scale) {
#pragma omp parallel for simd schedule(static)
  for (long i = begin; i < end; ++i) {
    const float gi = g[i] * grad_scale;
    const float mi = b1 * m[i] + (1.0f - b1) * gi;
    const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    const float pi = p[i] * decay - lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
    p[i] = pi;
    if constexpr (with_copy) bf16[i] = to_bf16(pi);
  }
}

}  // namespace

void adamw::step(std::span<float> params, std::span<const float> grads, float lr,
                 float grad_scale, std::span<std::uint16_t> bf16_copy) {
  ++t_;
  const float b1 = cfg_.beta1, b2 = cfg_.beta2, eps = cfg_.eps;
  const float c1 = 1.0f - static_cast<float>(std::pow(double(b1), t_));
  const float c2 = 1.0f - static_cast<float>(std::pow(double(b2), t_));
  float* p = params.data();
  const float* g = grads.data();
  float* m = m_.data();
  float* v = v_.data();
  if (!bf16_copy.empty() && bf16_copy.size() != params.size()) std::abort();  // REQUIRES: one per parameter
  for (const model::param_range& r : ranges_) {
    const float decay = r.decay ? 1.0f - lr * cfg_.weight_decay : 1.0f;
    const long begin = static_cast<long>(r.offset), end = static_cast<long>(r.offset + r.count);
    if (bf16_copy.empty())
      update_range<false>(p, g, m, v, nullptr, begin, end, b1, b2, c1, c2, eps, lr, decay, grad_scale);
    else
      update_range<true>(p, g, m, v, bf16_copy.data(), begin, end, b1, b2, c1, c2, eps, lr, decay, grad_scale);
  }
}

status adamw::restore(std::span<const float> m, std::span<const float> v, int t) {
  if (m.size() != m_.size() || v.size() != v_.size() || t < 0)
    return make_error(errc::invalid_argument,
                      "adamw::restore: state for " + std::to_string(m.size()) + "/" + std::to_string(v.size()) +
                          " parameters at step " + std::to_string(t) + ", optimiser has " +
                          std::to_string(m_.size()));
  std::copy(m.begin(), m.end(), m_.data());
  std::copy(v.begin(), v.end(), v_.data());
  t_ = t;
  return {};
}

float lr_schedule::at(int step) const {
  if (step < warmup_steps) return max_lr * float(step + 1) / float(warmup_steps);
  if (step >= total_steps) return min_lr;
  const double ratio = double(step - warmup_steps) / double(total_steps - warmup_steps);
  const double coeff = 0.5 * (1.0 + std::cos(M_PI * ratio));
  return static_cast<float>(min_lr + coeff * (double(max_lr) - min_lr));
}

double global_norm(std::span<const float> g) {
  // A fixed number of chunks, not one per thread: the summation order depends
  // only on g.size(). A stack array, so the step loop allocates nothing.
  constexpr long nchunks = 256;
  const std::size_t chunk = (g.size() + nchunks - 1) / nchunks;
  std::array<double, nchunks> partial{};
#pragma omp parallel for schedule(static)
  for (long c = 0; c < nchunks; ++c) {
    const std::size_t b = std::min(g.size(), std::size_t(c) * chunk);
    const std::size_t e = std::min(g.size(), b + chunk);
    const float* x = g.data() + b;
    const long len = static_cast<long>(e - b);
    double s = 0.0;
#pragma omp simd reduction(+ : s)
    for (long i = 0; i < len; ++i) s += double(x[i]) * x[i];
    partial[std::size_t(c)] = s;
  }
  double total = 0.0;
  for (double s : partial) total += s;
  return std::sqrt(total);
}

float clip_scale(double norm, float max_norm) {
  if (max_norm <= 0.0f || norm <= max_norm) return 1.0f;
  return static_cast<float>(max_norm / (norm + 1e-6));
}

}  // namespace loom::engine
