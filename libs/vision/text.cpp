#include "libs/vision/text.hpp"

#include <array>

namespace loom::vision {
namespace {

constexpr int glyph_w = 5, glyph_h = 7;
constexpr int glyph_count = 48;  // about a Latin alphabet's worth of lower and upper case shapes

using glyph = std::array<std::uint8_t, glyph_h>;  // bit x of row y: pixel (x, y)

// Each glyph: 2-4 strokes (vertical, horizontal, diagonal, or a small bowl)
// on the 5x7 grid, like the strokes letters are made of.
std::array<glyph, glyph_count> make_font() {
  std::array<glyph, glyph_count> font{};
  std::mt19937_64 rng(0x5EED'F0A7ull);
  auto set = [](glyph& g, int x, int y) {
    if (x >= 0 && x < glyph_w && y >= 0 && y < glyph_h) g[y] |= std::uint8_t(1u << x);
  };
  for (auto& g : font) {
    const int strokes = 2 + static_cast<int>(rng() % 3);
    for (int s = 0; s < strokes; ++s) {
      const int kind = static_cast<int>(rng() % 4);
      const int a = static_cast<int>(rng() % glyph_w), b = static_cast<int>(rng() % glyph_h);
      if (kind == 0)  // vertical stem
        for (int y = static_cast<int>(rng() % 3); y < glyph_h; ++y) set(g, a, y);
      if (kind == 1)  // horizontal bar
        for (int x = 0; x < glyph_w; ++x) set(g, x, b);
      if (kind == 2)  // diagonal
        for (int i = 0; i < glyph_h; ++i) set(g, (rng() % 2 ? i : glyph_w - 1 - i) * glyph_w / glyph_h, i);
      if (kind == 3)  // bowl: a 3x3 ring at the bottom
        for (int y = 4; y < glyph_h; ++y)
          for (int x = 1; x < 4; ++x)
            if (y != 5 || x != 2) set(g, x, y);
    }
  }
  return font;
}

const std::array<glyph, glyph_count>& font() {
  static const auto f = make_font();
  return f;
}

}  // namespace

std::uint32_t line_height(const text_style& style) { return (glyph_h + style.line_gap) * style.scale; }

std::uint64_t draw_text_line(media::image& img, std::uint32_t x0, std::uint32_t y0, std::uint32_t x1,
                             const text_style& style, std::mt19937_64& rng) {
  const std::uint32_t adv = (glyph_w + 1) * style.scale;
  std::uint64_t set = 0;
  int word_left = 2 + static_cast<int>(rng() % 8);
  for (std::uint32_t x = x0; x + glyph_w * style.scale <= x1; x += adv) {
    if (word_left-- == 0) {  // a space
      word_left = 2 + static_cast<int>(rng() % 8);
      continue;
    }
    const glyph& g = font()[rng() % glyph_count];
    for (int gy = 0; gy < glyph_h; ++gy)
      for (int gx = 0; gx < glyph_w; ++gx) {
        if (!(g[gy] >> gx & 1u)) continue;
        for (std::uint32_t dy = 0; dy < style.scale; ++dy)
          for (std::uint32_t dx = 0; dx < style.scale; ++dx) {
            const std::uint32_t px = x + gx * style.scale + dx, py = y0 + gy * style.scale + dy;
            if (px >= img.width || py >= img.height) continue;
            std::uint8_t* p = img.row(py) + std::size_t{px} * 3;
            p[0] = style.r, p[1] = style.g, p[2] = style.b;
            ++set;
          }
      }
  }
  return set;
}

void draw_text_block(media::image& img, std::uint32_t x0, std::uint32_t y0, std::uint32_t x1, std::uint32_t y1,
                     const text_style& style, std::mt19937_64& rng) {
  const std::uint32_t lh = line_height(style);
  for (std::uint32_t y = y0; y + glyph_h * style.scale <= y1; y += lh) {
    // Ragged right edge, as paragraphs end short.
    const std::uint32_t end = rng() % 5 == 0 ? x0 + (x1 - x0) * (30 + rng() % 60) / 100 : x1;
    draw_text_line(img, x0, y, end, style, rng);
  }
}

}  // namespace loom::vision
