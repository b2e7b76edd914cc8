// decode(): probe (limits first), then the format's decoder; and the small
// pixel helpers the codecs share.
#include "libs/media/codec.hpp"

#include "libs/media/codecs.hpp"
#include "libs/media/probe.hpp"

#include <new>

namespace loom::media {

std::string_view format_name(format f) {
  switch (f) {
    case format::png: return "png";
    case format::jpeg: return "jpeg";
    case format::webp: return "webp";
    case format::gif: return "gif";
  }
  return "unknown";
}

image make_image(std::uint32_t w, std::uint32_t h, std::uint8_t r, std::uint8_t g, std::uint8_t b) {
  image img;
  img.width = w;
  img.height = h;
  img.pixels.resize(std::size_t{w} * h * 3);
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) {
    img.pixels[i] = r;
    img.pixels[i + 1] = g;
    img.pixels[i + 2] = b;
  }
  return img;
}

result<image> decode(std::string_view bytes, const limits& lim) {
  auto info = probe(bytes, lim);
  if (!info) return info.err();
  switch (info->fmt) {
    case format::png: return detail::png_decode(bytes, *info);
    case format::jpeg: return detail::jpeg_decode(bytes, *info);
    case format::webp: return detail::webp_decode(bytes, *info);
    case format::gif: return detail::gif_decode(bytes, *info);
  }
  return make_error(errc::internal, "decode: unknown format");
}

namespace detail {

result<image> allocate(std::uint32_t w, std::uint32_t h, int bytes_per_pixel) {
  image img;
  img.width = w;
  img.height = h;
  try {
    img.pixels.resize(std::size_t{w} * h * static_cast<std::size_t>(bytes_per_pixel));
  } catch (const std::bad_alloc&) {
    return make_error(errc::internal, "decode: out of memory for " + std::to_string(w) + "x" + std::to_string(h));
  }
  return img;
}

void rgba_to_rgb_on_white(std::vector<std::uint8_t>& px, std::size_t n) {
  // Front to back is safe in place: pixel i is written at 3i, read from 4i >= 3i.
  for (std::size_t i = 0; i < n; ++i) blend_on_white(px.data() + i * 4, px.data() + i * 3);
  px.resize(n * 3);
}

}  // namespace detail
}  // namespace loom::media
