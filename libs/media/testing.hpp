// Synthetic images for media's tests and bench/media_bench.cpp: gradients,
// random shapes and smooth noise textures, deterministic for a seed (our own
// bit-to-double conversions, no std::*_distribution whose output varies by
// standard library). Header-only; no codec libraries.
#pragma once

#include "libs/media/image.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace loom::media::testing {

// Uniform in [0, 1).
inline double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

struct rgb {
  double r, g, b;
};
inline rgb random_colour(std::mt19937_64& rng) { return {255 * unit(rng), 255 * unit(rng), 255 * unit(rng)}; }
inline rgb mix(rgb a, rgb b, double t) { return {a.r + (b.r - a.r) * t, a.g + (b.g - a.g) * t, a.b + (b.b - a.b) * t}; }

inline void put(image& img, std::uint32_t x, std::uint32_t y, rgb c) {
  std::uint8_t* p = img.row(y) + std::size_t{x} * 3;
  p[0] = static_cast<std::uint8_t>(std::clamp(c.r, 0.0, 255.0));
  p[1] = static_cast<std::uint8_t>(std::clamp(c.g, 0.0, 255.0));
  p[2] = static_cast<std::uint8_t>(std::clamp(c.b, 0.0, 255.0));
}
inline rgb get(const image& img, std::uint32_t x, std::uint32_t y) {
  const std::uint8_t* p = img.row(y) + std::size_t{x} * 3;
  return {double(p[0]), double(p[1]), double(p[2])};
}

// A linear gradient between two colours along a direction.
inline image gradient(std::uint32_t w, std::uint32_t h, rgb a, rgb b, double angle) {
  image img = make_image(w, h);
  const double dx = std::cos(angle), dy = std::sin(angle);
  const double span = std::abs(dx) * w + std::abs(dy) * h;
  const double base = std::min(0.0, dx * w) + std::min(0.0, dy * h);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) put(img, x, y, mix(a, b, (dx * x + dy * y - base) / span));
  return img;
}

// Smooth value noise in [0, 1) with cells of `cell` pixels (bilinear, smoothstep).
inline std::vector<double> value_noise(std::uint32_t w, std::uint32_t h, double cell, std::mt19937_64& rng) {
  const auto gw = static_cast<std::uint32_t>(w / cell) + 2, gh = static_cast<std::uint32_t>(h / cell) + 2;
  std::vector<double> grid(std::size_t{gw} * gh);
  for (auto& g : grid) g = unit(rng);
  std::vector<double> out(std::size_t{w} * h);
  for (std::uint32_t y = 0; y < h; ++y)
    for (std::uint32_t x = 0; x < w; ++x) {
      const double fx = x / cell, fy = y / cell;
      const auto ix = static_cast<std::uint32_t>(fx), iy = static_cast<std::uint32_t>(fy);
      double tx = fx - ix, ty = fy - iy;
      tx = tx * tx * (3 - 2 * tx);
      ty = ty * ty * (3 - 2 * ty);
      const double a = grid[iy * gw + ix], b = grid[iy * gw + ix + 1];
      const double c = grid[(iy + 1) * gw + ix], d = grid[(iy + 1) * gw + ix + 1];
      out[std::size_t{y} * w + x] = (a + (b - a) * tx) * (1 - ty) + (c + (d - c) * tx) * ty;
    }
  return out;
}

// A scene for a seed: a gradient or a two-colour noise texture as background,
// then 2-7 random rectangles, ellipses and bands.
inline image scene(std::uint64_t seed, std::uint32_t w, std::uint32_t h) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  image img = gradient(w, h, random_colour(rng), random_colour(rng), 6.283 * unit(rng));
  if (rng() % 2) {
    const rgb a = random_colour(rng), b = random_colour(rng);
    const auto noise = value_noise(w, h, 6 + 30 * unit(rng), rng);
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x) put(img, x, y, mix(mix(a, b, noise[std::size_t{y} * w + x]), get(img, x, y), 0.3));
  }
  const int shapes = 2 + static_cast<int>(rng() % 6);
  for (int s = 0; s < shapes; ++s) {
    const rgb c = random_colour(rng);
    const double cx = w * unit(rng), cy = h * unit(rng);
    const double rx = w * (0.08 + 0.3 * unit(rng)), ry = h * (0.08 + 0.3 * unit(rng));
    const int kind = static_cast<int>(rng() % 3);
    const double angle = 3.1416 * unit(rng), ca = std::cos(angle), sa = std::sin(angle);
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x) {
        const double dx = (x - cx) / rx, dy = (y - cy) / ry;
        bool inside = false;
        if (kind == 0) inside = std::abs(dx) < 1 && std::abs(dy) < 1;
        if (kind == 1) inside = dx * dx + dy * dy < 1;
        if (kind == 2) inside = std::abs((x - cx) * ca + (y - cy) * sa) < rx * 0.25;  // a band through the centre
        if (inside) put(img, x, y, c);
      }
  }
  return img;
}

// Mean absolute difference per sample. REQUIRES: equal sizes.
inline double mean_abs_error(const image& a, const image& b) {
  double sum = 0;
  for (std::size_t i = 0; i < a.pixels.size(); ++i) sum += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return a.pixels.empty() ? 0 : sum / static_cast<double>(a.pixels.size());
}

}  // namespace loom::media::testing
