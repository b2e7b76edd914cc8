#include "libs/vision/features.hpp"

#include "libs/media/normalise.hpp"

#include <cmath>

namespace loom::vision {

namespace {

// Mean |luma step| between neighbours across the 8-pixel grid lines, over
// the same off the grid, both directions, full size.
float grid_edge_ratio(const media::image& img) {
  auto luma = [&](std::uint32_t x, std::uint32_t y) {
    const std::uint8_t* p = img.row(y) + std::size_t{x} * 3;
    return 0.299 * p[0] + 0.587 * p[1] + 0.114 * p[2];
  };
  double on = 0, off = 0;
  std::uint64_t n_on = 0, n_off = 0;
  for (std::uint32_t y = 0; y < img.height; ++y)
    for (std::uint32_t x = 0; x < img.width; ++x) {
      const double c = luma(x, y);
      if (x > 0) {
        const double d = std::abs(c - luma(x - 1, y));
        if (x % 8 == 0) on += d, ++n_on; else off += d, ++n_off;
      }
      if (y > 0) {
        const double d = std::abs(c - luma(x, y - 1));
        if (y % 8 == 0) on += d, ++n_on; else off += d, ++n_off;
      }
    }
  if (n_on == 0 || n_off == 0) return 0.0f;
  return static_cast<float>(std::log((1 + on / double(n_on)) / (1 + off / double(n_off))));
}

}  // namespace

prepared_image prepare(const media::image& img, int side) {
  prepared_image p;
  const auto s = static_cast<std::uint32_t>(side);
  p.rgb = media::resize_area(img, s, s).pixels;

  const int n = 2 * side;
  std::vector<float> rgb(std::size_t(n) * n * 3), luma(std::size_t(n) * n);
  media::resize_plane(img.pixels.data(), img.width, img.height, 3, rgb.data(), std::uint32_t(n), std::uint32_t(n));
  double sum = 0, sum2 = 0;
  for (std::size_t i = 0; i < luma.size(); ++i) {
    luma[i] = 0.299f * rgb[3 * i] + 0.587f * rgb[3 * i + 1] + 0.114f * rgb[3 * i + 2];  // BT.601
    sum += luma[i], sum2 += double(luma[i]) * luma[i];
  }
  const double mean = sum / double(luma.size());
  double lsum = 0, lsum2 = 0;
  for (int y = 1; y + 1 < n; ++y)
    for (int x = 1; x + 1 < n; ++x) {
      const float* c = luma.data() + std::size_t(y) * n + x;
      const double lap = c[-1] + c[1] + c[-n] + c[n] - 4.0 * c[0];
      lsum += lap, lsum2 += lap * lap;
    }
  const double m = double(n - 2) * (n - 2);
  const double lap_var = std::max(0.0, lsum2 / m - (lsum / m) * (lsum / m));
  p.hand[0] = static_cast<float>(std::log1p(lap_var));
  p.hand[1] = static_cast<float>(std::log1p(std::sqrt(std::max(0.0, sum2 / double(luma.size()) - mean * mean))));
  p.hand[2] = grid_edge_ratio(img);
  return p;
}

void to_input(const prepared_image& p, int side, bool flip, float* x) {
  for (int y = 0; y < side; ++y)
    for (int i = 0; i < side; ++i) {
      const int sx = flip ? side - 1 - i : i;
      const std::uint8_t* s = p.rgb.data() + (std::size_t(y) * side + sx) * 3;
      float* d = x + (std::size_t(y) * side + i) * 3;
      for (int c = 0; c < 3; ++c) d[c] = (float(s[c]) - 127.5f) / 64.0f;
    }
}

}  // namespace loom::vision
