// Deterministic inputs for the codec tests and codec_bench: Gaussian and
// Student-t values from a fixed seed (Box-Muller on splitmix64, so the values
// do not depend on the standard library's distributions), and the relative L2
// error. Header-only; test and bench code only.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

namespace loom::codec::testing {

class rng {
 public:
  explicit rng(std::uint64_t seed) : s_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)
  double gauss() {
    if (have_spare_) {
      have_spare_ = false;
      return spare_;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform())), t = 6.283185307179586 * uniform();
    spare_ = r * std::sin(t);
    have_spare_ = true;
    return r * std::cos(t);
  }
  // Student-t with df degrees of freedom: z / sqrt(chi2_df / df).
  double student_t(int df) {
    double chi2 = 0;
    for (int i = 0; i < df; ++i) {
      const double g = gauss();
      chi2 += g * g;
    }
    return gauss() / std::sqrt(chi2 / df);
  }

 private:
  std::uint64_t s_;
  double spare_ = 0;
  bool have_spare_ = false;
};

inline std::vector<float> gaussian(std::size_t n, std::uint64_t seed, double sigma = 1.0) {
  rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(sigma * r.gauss());
  return v;
}

inline std::vector<float> student_t(std::size_t n, std::uint64_t seed, int df = 3, double scale = 1.0) {
  rng r(seed);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale * r.student_t(df));
  return v;
}

// ||got - want|| / ||want|| (0 when both are zero).
inline double rel_l2(std::span<const float> got, std::span<const float> want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    num += d * d;
    den += static_cast<double>(want[i]) * want[i];
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

}  // namespace loom::codec::testing
