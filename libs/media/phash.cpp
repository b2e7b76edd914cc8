// pHash and the pixel digest. The 32x32 luma is computed by resampling RGB
// first and weighting after: area averaging and the luma weights are both
// linear, so the order does not matter and no full-size gray plane is needed.
#include "libs/media/phash.hpp"

#include "libs/media/normalise.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <numbers>

namespace loom::media {
namespace {

constexpr int n = 32;  // DCT size
constexpr int k = 8;   // coefficients kept per axis (u, v in 1..k)

// cos_table[u][x] = cos(pi * (2x + 1) * u / (2n)), u in 0..k.
const std::array<std::array<float, n>, k + 1>& cos_table() {
  static const auto table = [] {
    std::array<std::array<float, n>, k + 1> t{};
    for (int u = 0; u <= k; ++u)
      for (int x = 0; x < n; ++x) t[u][x] = static_cast<float>(std::cos(std::numbers::pi * (2 * x + 1) * u / (2.0 * n)));
    return t;
  }();
  return table;
}

}  // namespace

std::uint64_t phash(const image& img) {
  std::array<float, n * n * 3> rgb;
  resize_plane(img.pixels.data(), img.width, img.height, 3, rgb.data(), n, n);
  std::array<float, n * n> luma;
  for (int i = 0; i < n * n; ++i) luma[i] = 0.299f * rgb[i * 3] + 0.587f * rgb[i * 3 + 1] + 0.114f * rgb[i * 3 + 2];
  // Separable DCT-II, only the rows/columns 1..k that are kept. The constant
  // scale factors are the same for every kept coefficient and left out.
  const auto& c = cos_table();
  std::array<float, k * n> rows{};  // rows[(v-1) * n + y] = sum_x luma[y][x] cos_v(x)
  for (int v = 1; v <= k; ++v)
    for (int y = 0; y < n; ++y) {
      float acc = 0;
      for (int x = 0; x < n; ++x) acc += luma[y * n + x] * c[v][x];
      rows[(v - 1) * n + y] = acc;
    }
  std::array<float, k * k> coeff;  // coeff[(u-1) * k + (v-1)]: u vertical, v horizontal frequency
  for (int u = 1; u <= k; ++u)
    for (int v = 1; v <= k; ++v) {
      float acc = 0;
      for (int y = 0; y < n; ++y) acc += rows[(v - 1) * n + y] * c[u][y];
      coeff[(u - 1) * k + (v - 1)] = acc;
    }
  auto sorted = coeff;
  std::nth_element(sorted.begin(), sorted.begin() + k * k / 2, sorted.end());
  const float upper = sorted[k * k / 2];
  const float lower = *std::max_element(sorted.begin(), sorted.begin() + k * k / 2);
  const float median = (lower + upper) / 2;
  std::uint64_t bits = 0;
  for (int i = 0; i < k * k; ++i)
    if (coeff[i] > median) bits |= std::uint64_t{1} << i;
  return bits;
}

int hamming(std::uint64_t a, std::uint64_t b) { return std::popcount(a ^ b); }

crypto::digest pixel_digest(const image& img) {
  crypto::sha256_stream s;
  unsigned char dims[8];
  for (int i = 0; i < 4; ++i) {
    dims[i] = static_cast<unsigned char>(img.width >> (8 * i));
    dims[4 + i] = static_cast<unsigned char>(img.height >> (8 * i));
  }
  s.update(dims, sizeof dims);
  s.update(img.pixels.data(), img.pixels.size());
  return s.finish();
}

}  // namespace loom::media
