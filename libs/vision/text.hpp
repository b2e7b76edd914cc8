// Text-like glyph rows for the generator (generate.hpp): a bitmap font of our
// own making (5x7 glyphs assembled from random strokes for a fixed seed, so
// no font file or licence is involved) and a routine that lays out lines of
// "words" in it. Pure functions on images the caller owns; thread-safe.
#pragma once

#include "libs/media/image.hpp"

#include <cstdint>
#include <random>

namespace loom::vision {

struct text_style {
  std::uint32_t scale = 1;      // each font pixel becomes scale x scale
  std::uint32_t line_gap = 3;   // empty font pixels between lines (x scale)
  std::uint8_t r = 0, g = 0, b = 0;
};

// Draws one glyph row starting at (x0, y0), words of 2-9 glyphs separated by
// one blank glyph, until x1; returns how many pixels it set.
std::uint64_t draw_text_line(media::image& img, std::uint32_t x0, std::uint32_t y0, std::uint32_t x1,
                             const text_style& style, std::mt19937_64& rng);

// Lines from y0 to y1 inside columns [x0, x1), each line_height() apart.
void draw_text_block(media::image& img, std::uint32_t x0, std::uint32_t y0, std::uint32_t x1, std::uint32_t y1,
                     const text_style& style, std::mt19937_64& rng);

// Height of one line in pixels: (7 + line_gap) * scale.
std::uint32_t line_height(const text_style& style);

}  // namespace loom::vision
