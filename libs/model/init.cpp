#include "libs/model/init.hpp"

#include <cmath>
#include <cstring>

namespace loom::model {
namespace {

// Counter-based N(0,1): value i of stream `key` depends on (key, i) only.
std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
double normal_at(std::uint64_t key, std::uint64_t i) {
  const std::uint64_t a = splitmix64(key ^ splitmix64(2 * i)), b = splitmix64(key ^ splitmix64(2 * i + 1));
  const double u1 = (double(a >> 11) + 0.5) * 0x1p-53, u2 = double(b >> 11) * 0x1p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace

void init_params(const gpt2_config& cfg, std::span<float> params, std::uint64_t seed) {
  const param_layout layout = make_param_layout(cfg);
  const double std_base = 0.02, std_proj = 0.02 / std::sqrt(2.0 * cfg.layers);
  float* base = params.data();
  for (int ti = 0; ti < num_tensors; ++ti) {
    const auto id = static_cast<tensor_id>(ti);
    float* p = base + layout.offset(id);
    long n = static_cast<long>(layout.size(id));
    double sd = 0.0, fill = 0.0;
    switch (id) {
      case tensor_id::wte:
        sd = std_base;
        n = long(cfg.vocab) * cfg.channels;  // padding rows stay 0
        std::memset(p + n, 0, sizeof(float) * (layout.size(id) - n));
        break;
      case tensor_id::wpe: case tensor_id::qkvw: case tensor_id::fcw: sd = std_base; break;
      case tensor_id::attprojw: case tensor_id::fcprojw: sd = std_proj; break;
      case tensor_id::ln1w: case tensor_id::ln2w: case tensor_id::lnfw: fill = 1.0; break;
      default: break;  // biases
    }
    const std::uint64_t key = splitmix64(seed) ^ splitmix64(0x1000 + ti);
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i)
      p[i] = sd > 0 ? static_cast<float>(sd * normal_at(key, std::uint64_t(i))) : float(fill);
  }
}

}  // namespace loom::model
