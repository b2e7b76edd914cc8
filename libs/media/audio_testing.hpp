// Synthetic audio for media's tests and bench/media_bench.cpp: tones, white
// noise, silence padding and a speech-like signal (voiced harmonics under a
// syllable-rate envelope), deterministic for a seed. Interleaved float
// samples in [-1, 1]. Header-only; no codec libraries.
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>
#include <random>
#include <vector>

namespace loom::media::testing {

// A sine of `amplitude` on every channel (same phase), starting at phase 0.
inline std::vector<float> tone(double hz, double amplitude, double seconds, std::uint32_t rate,
                               std::uint32_t channels = 1) {
  const auto n = static_cast<std::size_t>(std::llround(seconds * rate));
  std::vector<float> out(n * channels);
  for (std::size_t i = 0; i < n; ++i)
    for (std::uint32_t c = 0; c < channels; ++c)
      out[i * channels + c] = static_cast<float>(amplitude * std::sin(2 * std::numbers::pi * hz * i / rate));
  return out;
}

// Uniform white noise of peak `amplitude` (our own bits-to-float, stable across libraries).
inline std::vector<float> noise(std::uint64_t seed, double amplitude, double seconds, std::uint32_t rate,
                                std::uint32_t channels = 1) {
  std::mt19937_64 rng(seed);
  std::vector<float> out(static_cast<std::size_t>(std::llround(seconds * rate)) * channels);
  for (auto& v : out) v = static_cast<float>(amplitude * (2 * (static_cast<double>(rng() >> 11) * 0x1.0p-53) - 1));
  return out;
}

// `x` with lead and trail seconds of digital silence.
inline std::vector<float> pad(const std::vector<float>& x, double lead, double trail, std::uint32_t rate,
                              std::uint32_t channels = 1) {
  std::vector<float> out(static_cast<std::size_t>(std::llround(lead * rate)) * channels, 0.0f);
  out.insert(out.end(), x.begin(), x.end());
  out.resize(out.size() + static_cast<std::size_t>(std::llround(trail * rate)) * channels, 0.0f);
  return out;
}

// Speech-like: a 100-220 Hz voice with 12 harmonics (1/k amplitudes), its
// loudness following 4 "syllables" per second, a little breath noise; the
// channels differ slightly (a stereo room). Peak about 0.5.
inline std::vector<float> speechlike(std::uint64_t seed, double seconds, std::uint32_t rate,
                                     std::uint32_t channels = 1) {
  std::mt19937_64 rng(seed);
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  const double f0 = 100 + 120 * unit();
  const auto n = static_cast<std::size_t>(std::llround(seconds * rate));
  std::vector<float> out(n * channels);
  double phase = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / rate;
    const double env = std::pow(std::sin(std::numbers::pi * 4 * t), 2);
    const double f = f0 * (1 + 0.08 * std::sin(2 * std::numbers::pi * 0.7 * t));  // intonation
    phase += 2 * std::numbers::pi * f / rate;
    double v = 0;
    for (int k = 1; k <= 12; ++k) v += std::sin(k * phase) / k;
    for (std::uint32_t c = 0; c < channels; ++c)
      out[i * channels + c] = static_cast<float>(0.2 * env * v * (1 - 0.1 * c) + 0.01 * (2 * unit() - 1));
  }
  return out;
}

}  // namespace loom::media::testing
