#include "libs/vision/generate.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/testing.hpp"
#include "libs/vision/damage.hpp"
#include "libs/vision/text.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>

namespace loom::vision {
namespace {

namespace mt = media::testing;
using media::image;

std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  std::uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double uniform(std::mt19937_64& rng, double lo, double hi) { return lo + (hi - lo) * mt::unit(rng); }

std::uint8_t clamp8(double v) { return static_cast<std::uint8_t>(std::clamp(std::lround(v), 0l, 255l)); }

// Separable Gaussian blur, edges clamped; kernel radius 3 sigma.
image blur(const image& src, double sigma) {
  const int r = std::max(1, static_cast<int>(std::ceil(3 * sigma)));
  std::vector<double> k(2 * r + 1);
  double sum = 0;
  for (int i = -r; i <= r; ++i) sum += k[i + r] = std::exp(-0.5 * i * i / (sigma * sigma));
  for (auto& v : k) v /= sum;
  const int w = static_cast<int>(src.width), h = static_cast<int>(src.height);
  std::vector<double> tmp(std::size_t(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        double a = 0;
        for (int i = -r; i <= r; ++i) a += k[i + r] * src.row(y)[std::clamp(x + i, 0, w - 1) * 3 + c];
        tmp[(std::size_t(y) * w + x) * 3 + c] = a;
      }
  image out = media::make_image(src.width, src.height);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        double a = 0;
        for (int i = -r; i <= r; ++i) a += k[i + r] * tmp[(std::size_t(std::clamp(y + i, 0, h - 1)) * w + x) * 3 + c];
        out.row(y)[x * 3 + c] = clamp8(a);
      }
  return out;
}

image jpeg_round_trip(const image& img, int quality) {
  auto bytes = media::encode_jpeg(img, quality);
  if (!bytes) std::abort();  // our own valid image: a broken invariant
  auto back = media::decode(*bytes);
  if (!back) std::abort();
  return std::move(*back);
}

// Most files ingest sees are JPEGs; so are the corrupted ones. Re-encoding
// every class alike keeps "has JPEG artefacts" from being a label.
image maybe_jpeg(const image& img, std::mt19937_64& rng) {
  if (rng() % 10 < 3) return img;  // 30 % stay lossless (PNG-like)
  return jpeg_round_trip(img, 55 + static_cast<int>(rng() % 41));
}

// Text-like colours: dark ink on light paper or light on dark.
void ink_and_paper(std::mt19937_64& rng, mt::rgb& ink, mt::rgb& paper) {
  const double p = uniform(rng, 200, 255), i = uniform(rng, 0, 90);
  paper = {p - uniform(rng, 0, 25), p - uniform(rng, 0, 25), p - uniform(rng, 0, 25)};
  ink = {i + uniform(rng, 0, 40), i + uniform(rng, 0, 40), i + uniform(rng, 0, 40)};
  if (rng() % 4 == 0) std::swap(ink, paper);
}

text_style style_for(std::uint32_t h, const mt::rgb& ink, std::mt19937_64& rng) {
  text_style s;
  // 7-17 lines per image height keeps glyphs 2-5 pixels tall at the 64-pixel input.
  const std::uint32_t lines = 7 + static_cast<std::uint32_t>(rng() % 11);
  s.line_gap = 2 + static_cast<std::uint32_t>(rng() % 4);
  s.scale = std::max<std::uint32_t>(1, h / (lines * (7 + s.line_gap)));
  s.r = clamp8(ink.r), s.g = clamp8(ink.g), s.b = clamp8(ink.b);
  return s;
}

image make_ok(std::uint32_t w, std::uint32_t h, std::uint64_t seed, std::mt19937_64& rng) {
  image img = mt::scene(seed, w, h);
  if (rng() % 4 == 0) {  // a caption or watermark: one short line is still a picture
    mt::rgb ink, paper;
    ink_and_paper(rng, ink, paper);
    text_style s = style_for(h, ink, rng);
    const std::uint32_t y = static_cast<std::uint32_t>(rng() % (h - 8 * s.scale));
    draw_text_line(img, w / 10, y, w / 10 + w * (20 + rng() % 40) / 100, s, rng);
  }
  if (rng() % 3 == 0) img = blur(img, uniform(rng, 0.3, 0.8));  // soft but usable focus
  return maybe_jpeg(img, rng);
}

image make_blank(std::uint32_t w, std::uint32_t h, std::mt19937_64& rng) {
  const mt::rgb a = mt::random_colour(rng);
  const int kind = static_cast<int>(rng() % 3);
  // Near-flat: a gradient over at most 12 levels and/or noise of at most +-4.
  const mt::rgb b = kind == 1 ? mt::rgb{a.r + uniform(rng, -12, 12), a.g + uniform(rng, -12, 12), a.b + uniform(rng, -12, 12)} : a;
  image img = mt::gradient(w, h, a, b, 6.283 * mt::unit(rng));
  if (kind == 2) {
    const double amp = uniform(rng, 1, 4);
    for (auto& p : img.pixels) p = clamp8(p + uniform(rng, -amp, amp));
  }
  return maybe_jpeg(img, rng);
}

image make_blurred(std::uint32_t w, std::uint32_t h, std::uint64_t seed, std::mt19937_64& rng) {
  image img = mt::scene(seed, w, h);
  const double sigma = uniform(rng, 0.025, 0.06) * std::min(w, h);
  return maybe_jpeg(blur(img, sigma), rng);
}

// The share of 8x8 blocks whose mean absolute difference exceeds 16 levels.
double damaged_share(const image& a, const image& b) {
  int blocks = 0, damaged = 0;
  for (std::uint32_t by = 0; by + 8 <= a.height; by += 8)
    for (std::uint32_t bx = 0; bx + 8 <= a.width; bx += 8) {
      double d = 0;
      for (std::uint32_t y = by; y < by + 8; ++y)
        for (std::uint32_t i = bx * 3; i < (bx + 8) * 3; ++i) d += std::abs(int(a.row(y)[i]) - int(b.row(y)[i]));
      ++blocks;
      damaged += d / 192 > 16;
    }
  return blocks ? double(damaged) / blocks : 0;
}

image make_corrupted(std::uint32_t w, std::uint32_t h, std::uint64_t seed, std::mt19937_64& rng) {
  image clean = mt::scene(seed, w, h);
  const int quality = 70 + static_cast<int>(rng() % 26);
  auto bytes = media::encode_jpeg(clean, quality);
  if (!bytes) std::abort();
  auto reference = media::decode(*bytes);
  if (!reference) std::abort();
  // A damage the eye sees: at least 10 % of the blocks visibly changed. A
  // flip in the last rows or a cut just before EOI is not "corrupted".
  for (int attempt = 0;; ++attempt) {
    const int kind = static_cast<int>(rng() % 3);
    std::string bad = *bytes;
    if (kind != 1) bad = truncate_jpeg(bad, uniform(rng, 0.2, 0.85));
    if (kind != 0) bad = flip_jpeg_bytes(bad, 1 + static_cast<int>(rng() % 6), rng);
    auto img = decode_jpeg_lenient(bad);
    if (img && (damaged_share(*img, *reference) >= 0.10 || attempt >= 30)) {
      // Half were re-saved by some tool after the damage: a valid file now.
      return rng() % 2 ? jpeg_round_trip(*img, 75 + static_cast<int>(rng() % 21)) : std::move(*img);
    }
  }
}

image make_text(std::uint32_t w, std::uint32_t h, std::uint64_t seed, std::mt19937_64& rng) {
  mt::rgb ink, paper;
  ink_and_paper(rng, ink, paper);
  image img;
  if (rng() % 3 == 0) {  // text over a washed-out picture (a slide, a poster)
    img = mt::scene(seed, w, h);
    for (std::uint32_t y = 0; y < h; ++y)
      for (std::uint32_t x = 0; x < w; ++x) mt::put(img, x, y, mt::mix(mt::get(img, x, y), paper, 0.75));
  } else {
    img = mt::gradient(w, h, paper, mt::mix(paper, mt::random_colour(rng), 0.15), 6.283 * mt::unit(rng));
  }
  const text_style s = style_for(h, ink, rng);
  const std::uint32_t mx = w * static_cast<std::uint32_t>(2 + rng() % 8) / 100;
  const std::uint32_t my = h * static_cast<std::uint32_t>(2 + rng() % 8) / 100;
  draw_text_block(img, mx, my, w - mx, h - my, s, rng);
  return maybe_jpeg(img, rng);
}

}  // namespace

labelled_image generate_example(image_label label, std::uint64_t seed) {
  std::mt19937_64 rng(mix_seed(seed, 0xC1A55));
  // 96-176 pixels a side: the 64-pixel input is always a downscale.
  const auto w = static_cast<std::uint32_t>(96 + rng() % 81), h = static_cast<std::uint32_t>(96 + rng() % 81);
  const std::uint64_t scene_seed = mix_seed(seed, 0x5CE7E);
  labelled_image out;
  out.label = label;
  switch (label) {
    case image_label::ok: out.img = make_ok(w, h, scene_seed, rng); break;
    case image_label::blank: out.img = make_blank(w, h, rng); break;
    case image_label::blurred: out.img = make_blurred(w, h, scene_seed, rng); break;
    case image_label::corrupted: out.img = make_corrupted(w, h, scene_seed, rng); break;
    case image_label::mostly_text: out.img = make_text(w, h, scene_seed, rng); break;
  }
  return out;
}

std::vector<labelled_image> generate_set(std::uint64_t seed, int per_class) {
  const int n = per_class * num_labels;
  std::vector<labelled_image> out(static_cast<std::size_t>(std::max(n, 0)));
#pragma omp parallel for schedule(dynamic, 4)
  for (int i = 0; i < n; ++i) {
    const int label = i % num_labels;
    out[i] = generate_example(static_cast<image_label>(label), mix_seed(mix_seed(seed, label), i / num_labels));
  }
  return out;
}

}  // namespace loom::vision
