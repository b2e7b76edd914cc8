// Internal: the per-format halves of probe() and decode(), one .cpp per codec
// library (png_codec.cpp, jpeg_codec.cpp, webp_codec.cpp, gif_codec.cpp).
// *_info reads headers only and knows nothing of limits; *_decode runs after
// probe() accepted the same bytes and gets its image_info. Pure; thread-safe.
#pragma once

#include "libs/media/image.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::media::detail {

result<image_info> png_info(std::string_view bytes);
result<image_info> jpeg_info(std::string_view bytes);
result<image_info> webp_info(std::string_view bytes);
result<image_info> gif_info(std::string_view bytes);

result<image> png_decode(std::string_view bytes, const image_info& info);
result<image> jpeg_decode(std::string_view bytes, const image_info& info);
result<image> webp_decode(std::string_view bytes, const image_info& info);
result<image> gif_decode(std::string_view bytes, const image_info& info);

// An image whose pixels vector holds w * h * bytes_per_pixel zero bytes;
// errc::internal (not a reject reason) when the allocation fails.
result<image> allocate(std::uint32_t w, std::uint32_t h, int bytes_per_pixel);

// In place: n RGBA8 pixels at the front of px become n RGB8 pixels composited
// onto white; px is then resized to n * 3 (its capacity stays).
void rgba_to_rgb_on_white(std::vector<std::uint8_t>& px, std::size_t n);

// One RGBA8 pixel composited onto white, written as RGB8.
inline void blend_on_white(const std::uint8_t* rgba, std::uint8_t* rgb) {
  const unsigned a = rgba[3], na = 255 - a;
  for (int k = 0; k < 3; ++k) rgb[k] = static_cast<std::uint8_t>((rgba[k] * a + 255 * na + 127) / 255);
}

}  // namespace loom::media::detail
