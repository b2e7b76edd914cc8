// The value types of loom::media (issue 33): the image formats ingest accepts,
// what a probe learns from a header, the decoded pixels, and the decompression
// limits every probe and decode enforces before it allocates pixels.
// Plain values; no thread-safety concerns beyond those of std::vector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::media {

enum class format { png, jpeg, webp, gif };

// "png", "jpeg", "webp", "gif".
std::string_view format_name(format f);

// How the file stores colour (before decode turns everything into RGB8).
enum class colour_model { gray, rgb, palette, cmyk };

// What probe() reads from the header, without decoding pixels.
struct image_info {
  format fmt = format::png;
  std::uint32_t width = 0;   // of the canvas: GIF logical screen, WebP canvas
  std::uint32_t height = 0;
  colour_model colour = colour_model::rgb;
  int channels = 3;          // stored samples per pixel, alpha included (palette: 3, or 4 with tRNS)
  bool has_alpha = false;
  int bit_depth = 8;         // bits per sample (PNG 1..16, JPEG 8 or 12, GIF palette index bits)
  std::uint32_t frames = 1;  // > 1 for animated PNG (acTL), GIF and WebP; decode uses frame 1
};

// Refusal thresholds, checked on the header before any pixel buffer exists.
struct limits {
  std::uint32_t max_width = 16384;
  std::uint32_t max_height = 16384;
  std::uint64_t max_pixels = 64'000'000;            // width * height (a 256 MB RGBA worst case)
  std::uint64_t max_file_bytes = 64ull << 20;       // larger inputs are refused unread
  // A decompression bomb: a decode of more than bomb_min_bytes (width *
  // height * 3) from a file more than max_expansion times smaller. Deflate
  // peaks at 1032:1 per raw byte and real photos and drawings stay far below
  // 1000:1 of RGB8; beyond 4096:1 a file is flat colour or crafted. Small
  // images are exempt: a flat 300x300 icon costs nothing to decode. 0 = off.
  double max_expansion = 4096;
  std::uint64_t bomb_min_bytes = 16ull << 20;
};

// Decoded pixels: RGB8, row-major, no padding; alpha already composited onto
// white. pixels.size() == width * height * 3.
struct image {
  std::uint32_t width = 0;
  std::uint32_t height = 0;
  std::vector<std::uint8_t> pixels;

  std::size_t stride() const { return std::size_t{width} * 3; }
  std::uint8_t* row(std::uint32_t y) { return pixels.data() + y * stride(); }
  const std::uint8_t* row(std::uint32_t y) const { return pixels.data() + y * stride(); }
};

// An image of w x h filled with (r, g, b).
image make_image(std::uint32_t w, std::uint32_t h, std::uint8_t r = 255, std::uint8_t g = 255,
                 std::uint8_t b = 255);

}  // namespace loom::media
