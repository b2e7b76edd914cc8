#include "libs/retry/backoff.hpp"

#include <algorithm>
#include <cmath>

namespace loom::retry {

backoff::backoff(std::chrono::milliseconds initial, std::chrono::milliseconds max, double factor,
                 double jitter, std::uint64_t seed)
    : initial_(std::max(initial, std::chrono::milliseconds{0})),
      max_(std::max(max, initial_)),
      factor_(factor >= 1.0 ? factor : 1.0),
      jitter_(std::clamp(jitter, 0.0, 1.0)),
      rng_state_(seed) {}

std::chrono::milliseconds backoff::next() {
  // In double so that factor^attempts may overflow to +inf harmlessly.
  const double cap = static_cast<double>(max_.count());
  double d = std::min(cap, static_cast<double>(initial_.count()) * std::pow(factor_, attempts_));
  if (jitter_ > 0.0) d *= 1.0 + jitter_ * (2.0 * uniform() - 1.0);
  d = std::clamp(d, 0.0, cap);
  if (attempts_ < 1'000'000) ++attempts_;  // far past any cap; keeps the int from overflowing
  return std::chrono::milliseconds{static_cast<std::chrono::milliseconds::rep>(std::llround(d))};
}

void backoff::reset() { attempts_ = 0; }

double backoff::uniform() {
  // splitmix64 (Steele, Lea, Flood 2014): tiny, full-period, and unlike
  // std::uniform_real_distribution its output does not depend on the library.
  std::uint64_t z = (rng_state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

}  // namespace loom::retry
