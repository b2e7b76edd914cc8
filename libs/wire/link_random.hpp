// A tiny seeded random stream for the link model: splitmix64, so a seed gives
// the same numbers on every platform and standard library (std:: distributions
// do not promise that). Value type; one owner (the link_shaper or outage
// schedule that holds it).
#pragma once

#include <cmath>
#include <cstdint>

namespace loom::wire {

class link_random {
 public:
  // `seed` picks the experiment; `stream` separates independent uses of one
  // seed (loss vs jitter vs outages, uplink vs downlink).
  link_random(std::uint64_t seed, std::uint64_t stream)
      : state_(seed ^ (0x9e3779b97f4a7c15ULL * (stream + 1))) {}

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1): the top 53 bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi].
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  // Standard normal (Box-Muller; one of the pair is discarded to keep the
  // stream one-draw-per-call simple).
  double normal() {
    const double u1 = 1.0 - uniform();  // (0, 1]: log is finite
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::uint64_t state_;
};

}  // namespace loom::wire
