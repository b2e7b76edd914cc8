// Test-only encoders and file surgery for media_tests: PNGs of every colour
// type and depth (libpng's write API), lossless/lossy WebP (libwebp's encode
// API), GIFs (giflib's EGif API), an animated WebP and a CMYK JPEG assembled
// for frame-1 and colour tests, an EXIF block built with libexif, and chunk/
// segment insertion. Errors abort: these only ever see their own valid input.
#pragma once

#include "libs/media/image.hpp"

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::media::testing {

// A PNG via png_write_*: color_type/bit_depth as in png.h (PNG_COLOR_TYPE_*),
// rows packed as PNG stores them (16-bit big endian, sub-byte MSB first).
// palette: PLTE entries for type 3; trns: tRNS bytes (palette alphas) if any.
std::string png_raw(std::uint32_t w, std::uint32_t h, int color_type, int bit_depth, bool interlace,
                    const std::vector<std::uint8_t>& packed_rows,
                    const std::vector<std::array<std::uint8_t, 3>>& palette = {},
                    const std::vector<std::uint8_t>& trns = {});

// A PNG chunk with its length and CRC; and a PNG with chunks inserted after IHDR.
std::string png_chunk(std::string_view type, std::string_view data);
std::string png_insert_after_ihdr(const std::string& png, const std::vector<std::string>& chunks);

std::string webp_lossless(const image& img);
std::string webp_lossless_rgba(std::uint32_t w, std::uint32_t h, const std::vector<std::uint8_t>& rgba);
std::string webp_lossy(const image& img, float quality);
// Extended WebP: VP8X + the still image of webp_lossless(img) + extra chunks (e.g. {"EXIF", tiff}).
std::string webp_with_chunks(const image& img, const std::vector<std::pair<std::string, std::string>>& chunks);
// Animated WebP, canvas cw x ch, two lossless frames: `first` (RGBA) at (x, y), then a red one.
std::string webp_animated(std::uint32_t cw, std::uint32_t ch, std::uint32_t fw, std::uint32_t fh,
                          const std::vector<std::uint8_t>& first, std::uint32_t x, std::uint32_t y);

struct gif_frame {
  std::uint32_t left = 0, top = 0, w = 0, h = 0;
  std::vector<std::uint8_t> indices;  // w * h, row-major (reordered for interlace here)
  int transparent = -1;
  bool interlace = false;
};
// A GIF89a with a global palette (size a power of two, 2..256) and the frames.
std::string gif(std::uint32_t sw, std::uint32_t sh, const std::vector<std::array<std::uint8_t, 3>>& palette,
                const std::vector<gif_frame>& frames);

// A JPEG of CMYK samples (w * h * 4, as Adobe stores them: inverted) with the
// Adobe APP14 marker libjpeg writes for CMYK.
std::string jpeg_cmyk(std::uint32_t w, std::uint32_t h, const std::vector<std::uint8_t>& cmyk);

// A progressive JPEG (jpeg_simple_progression) of an RGB image.
std::string jpeg_progressive(const image& img, int quality);

// "Exif\0\0" + TIFF with Artist in IFD0, CameraOwnerName in the EXIF IFD and
// GPSLatitudeRef/GPSLatitude in the GPS IFD (built by libexif).
std::string exif_block();

// A JPEG with segments inserted after SOI: {marker, payload}.
std::string jpeg_insert_after_soi(const std::string& jpeg, const std::vector<std::pair<int, std::string>>& segments);

}  // namespace loom::media::testing
