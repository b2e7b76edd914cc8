// Area-average resampling (separable, streamed by rows) and the storage
// normalisation built on it.
#include "libs/media/normalise.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::media {
namespace {

// For output index o of n_out over n_in samples: the source span
// [o * s, (o + 1) * s) with s = n_in / n_out, as (first index, weights) with
// the weights summing to 1.
struct taps {
  std::vector<std::uint32_t> first;
  std::vector<std::uint32_t> offset;  // into w, n_out + 1 entries
  std::vector<float> w;
};

taps make_taps(std::uint32_t n_in, std::uint32_t n_out) {
  taps t;
  const double s = static_cast<double>(n_in) / n_out;
  t.offset.push_back(0);
  for (std::uint32_t o = 0; o < n_out; ++o) {
    const double lo = o * s, hi = std::min<double>((o + 1) * s, n_in);
    auto i = static_cast<std::uint32_t>(lo);
    t.first.push_back(i);
    for (; i < n_in && i < hi; ++i) {
      const double cover = std::min<double>(i + 1, hi) - std::max<double>(i, lo);
      if (cover > 1e-9) t.w.push_back(static_cast<float>(cover / (hi - lo)));
      else if (i == t.first.back()) ++t.first.back();  // a sliver below 1e-9: start at the next sample
    }
    t.offset.push_back(static_cast<std::uint32_t>(t.w.size()));
  }
  return t;
}

// Streams the resampling one output row at a time: each source row is
// resampled horizontally once (consecutive output rows share at most their
// boundary row, kept in `cached`), so scratch is two rows of dw x c floats
// whatever the image size. emit(y, row) receives output row y.
template <class Emit>
void resize_rows(const std::uint8_t* src, std::uint32_t sw, std::uint32_t sh, int c, std::uint32_t dw,
                 std::uint32_t dh, Emit&& emit) {
  const taps tx = make_taps(sw, dw), ty = make_taps(sh, dh);
  const std::size_t cc = static_cast<std::size_t>(c), row = std::size_t{dw} * cc;
  std::vector<float> acc(row), cached(row);
  std::uint32_t cached_y = UINT32_MAX;
  for (std::uint32_t y = 0; y < dh; ++y) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (std::uint32_t j = ty.offset[y]; j < ty.offset[y + 1]; ++j) {
      const std::uint32_t sy = ty.first[y] + (j - ty.offset[y]);
      if (sy != cached_y) {
        const std::uint8_t* in = src + std::size_t{sy} * sw * cc;
        for (std::uint32_t x = 0; x < dw; ++x) {
          const std::uint8_t* p = in + std::size_t{tx.first[x]} * cc;
          const std::uint32_t t0 = tx.offset[x], t1 = tx.offset[x + 1];
          if (cc == 3) {  // RGB, the common case: three sums per tap pass
            float r = 0, g = 0, b = 0;
            for (std::uint32_t t = t0; t < t1; ++t, p += 3) {
              r += tx.w[t] * p[0];
              g += tx.w[t] * p[1];
              b += tx.w[t] * p[2];
            }
            cached[x * 3] = r;
            cached[x * 3 + 1] = g;
            cached[x * 3 + 2] = b;
            continue;
          }
          for (std::size_t k = 0; k < cc; ++k) {
            float sum = 0;
            for (std::uint32_t t = t0; t < t1; ++t) sum += tx.w[t] * p[(t - t0) * cc + k];
            cached[x * cc + k] = sum;
          }
        }
        cached_y = sy;
      }
      const float wy = ty.w[j];
      for (std::size_t i = 0; i < row; ++i) acc[i] += wy * cached[i];
    }
    emit(y, acc.data());
  }
}

}  // namespace

void resize_plane(const std::uint8_t* src, std::uint32_t sw, std::uint32_t sh, int c, float* dst, std::uint32_t dw,
                  std::uint32_t dh) {
  const std::size_t row = std::size_t{dw} * static_cast<std::size_t>(c);
  resize_rows(src, sw, sh, c, dw, dh, [&](std::uint32_t y, const float* r) { std::copy_n(r, row, dst + y * row); });
}

image resize_area(const image& img, std::uint32_t w, std::uint32_t h) {
  image out;
  out.width = w;
  out.height = h;
  out.pixels.resize(std::size_t{w} * h * 3);
  resize_rows(img.pixels.data(), img.width, img.height, 3, w, h, [&](std::uint32_t y, const float* r) {
    std::uint8_t* o = out.row(y);
    for (std::size_t i = 0; i < out.stride(); ++i) o[i] = static_cast<std::uint8_t>(std::clamp(r[i], 0.0f, 255.0f) + 0.5f);
  });
  return out;
}

image crop(const image& img, std::uint32_t x, std::uint32_t y, std::uint32_t w, std::uint32_t h) {
  image out;
  out.width = w;
  out.height = h;
  out.pixels.resize(std::size_t{w} * h * 3);
  for (std::uint32_t r = 0; r < h; ++r)
    std::copy_n(img.row(y + r) + std::size_t{x} * 3, std::size_t{w} * 3, out.row(r));
  return out;
}

image normalise(const image& img, const normalise_policy& policy) {
  const std::uint32_t side = std::max<std::uint32_t>(policy.max_side, 1);
  if (policy.mode == fit_mode::center_crop && img.width != img.height) {
    const std::uint32_t s = std::min(img.width, img.height);
    return normalise(crop(img, (img.width - s) / 2, (img.height - s) / 2, s, s), policy);
  }
  const std::uint32_t longest = std::max(img.width, img.height);
  if (longest <= side) return img;
  const double scale = static_cast<double>(side) / longest;
  const auto w = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(img.width * scale)));
  const auto h = std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::lround(img.height * scale)));
  return resize_area(img, std::min(w, side), std::min(h, side));
}

}  // namespace loom::media
