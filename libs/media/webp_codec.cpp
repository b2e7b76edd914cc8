// WebP through libwebp: WebPGetFeatures for the header, WebPDecode into our
// own buffer for still images, libwebpdemux for frame 1 of an animation
// (painted on a white canvas). libwebp reports errors by status codes.
#include "libs/media/codecs.hpp"
#include "libs/media/containers.hpp"
#include "libs/media/reject.hpp"

#include <webp/decode.h>
#include <webp/demux.h>

#include <algorithm>
#include <memory>
#include <string>

namespace loom::media::detail {
namespace {

error status_error(VP8StatusCode st, const char* what) {
  const std::string msg = std::string("webp: ") + what + " failed with status " + std::to_string(st);
  if (st == VP8_STATUS_NOT_ENOUGH_DATA) return reject(reject_reason::truncated, msg);
  if (st == VP8_STATUS_OUT_OF_MEMORY) return make_error(errc::internal, msg);
  return reject(reject_reason::corrupt, msg);
}

// Decodes a still WebP bitstream of w x h into out (RGBA when alpha, else RGB).
VP8StatusCode decode_into(const std::uint8_t* data, std::size_t size, bool alpha, std::uint8_t* out, int w, int h) {
  WebPDecoderConfig config;
  if (!WebPInitDecoderConfig(&config)) return VP8_STATUS_INVALID_PARAM;
  const int bpp = alpha ? 4 : 3;
  config.output.colorspace = alpha ? MODE_RGBA : MODE_RGB;
  config.output.is_external_memory = 1;
  config.output.width = w;
  config.output.height = h;
  config.output.u.RGBA.rgba = out;
  config.output.u.RGBA.stride = w * bpp;
  config.output.u.RGBA.size = static_cast<std::size_t>(w) * h * bpp;
  const VP8StatusCode st = WebPDecode(data, size, &config);
  WebPFreeDecBuffer(&config.output);  // frees nothing of ours (external memory)
  return st;
}

result<image> decode_first_frame(std::string_view b, const image_info& info) {
  WebPData data{reinterpret_cast<const std::uint8_t*>(b.data()), b.size()};
  std::unique_ptr<WebPDemuxer, void (*)(WebPDemuxer*)> demux(WebPDemux(&data), WebPDemuxDelete);
  if (!demux) return reject(reject_reason::corrupt, "webp: the animation's chunks do not parse");
  WebPIterator it;
  if (!WebPDemuxGetFrame(demux.get(), 1, &it)) return reject(reject_reason::corrupt, "webp: no frame 1");
  std::unique_ptr<WebPIterator, void (*)(WebPIterator*)> release(&it, WebPDemuxReleaseIterator);
  if (it.width <= 0 || it.height <= 0 || it.x_offset < 0 || it.y_offset < 0 ||
      static_cast<std::uint32_t>(it.x_offset + it.width) > info.width ||
      static_cast<std::uint32_t>(it.y_offset + it.height) > info.height)
    return reject(reject_reason::corrupt, "webp: frame 1 lies outside the canvas");
  auto frame = allocate(static_cast<std::uint32_t>(it.width), static_cast<std::uint32_t>(it.height), 4);
  if (!frame) return frame.err();
  const auto st = decode_into(it.fragment.bytes, it.fragment.size, true, frame->pixels.data(), it.width, it.height);
  if (st != VP8_STATUS_OK) return status_error(st, "frame 1 decode");
  auto img = allocate(info.width, info.height, 3);
  if (!img) return img.err();
  std::fill(img->pixels.begin(), img->pixels.end(), std::uint8_t{255});
  for (int y = 0; y < it.height; ++y) {
    const std::uint8_t* src = frame->pixels.data() + static_cast<std::size_t>(y) * it.width * 4;
    std::uint8_t* dst = img->row(static_cast<std::uint32_t>(y + it.y_offset)) + std::size_t(it.x_offset) * 3;
    for (int x = 0; x < it.width; ++x) blend_on_white(src + x * 4, dst + x * 3);
  }
  return img;
}

}  // namespace

result<image_info> webp_info(std::string_view b) {
  WebPBitstreamFeatures f;
  const auto st = WebPGetFeatures(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), &f);
  if (st != VP8_STATUS_OK) return status_error(st, "WebPGetFeatures");
  image_info info;
  info.fmt = format::webp;
  info.width = static_cast<std::uint32_t>(f.width);
  info.height = static_cast<std::uint32_t>(f.height);
  info.has_alpha = f.has_alpha != 0;
  info.channels = info.has_alpha ? 4 : 3;
  std::uint32_t frames = 0;
  const auto end = walk_riff(b, [&](std::string_view fourcc, std::string_view) {
    frames += fourcc == "ANMF";
    return true;
  });
  if (end == walk_end::truncated) return reject(reject_reason::truncated, "webp: RIFF size runs past the end");
  if (end == walk_end::corrupt) return reject(reject_reason::corrupt, "webp: RIFF chunk sizes do not add up");
  if (f.has_animation) {
    if (frames == 0) return reject(reject_reason::corrupt, "webp: animation without frames");
    info.frames = frames;
  }
  return info;
}

result<image> webp_decode(std::string_view b, const image_info& info) {
  if (info.frames > 1 || info.frames == 0) return decode_first_frame(b, info);
  WebPBitstreamFeatures f;
  if (WebPGetFeatures(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), &f) == VP8_STATUS_OK &&
      f.has_animation)
    return decode_first_frame(b, info);
  auto img = allocate(info.width, info.height, info.has_alpha ? 4 : 3);
  if (!img) return img.err();
  const auto st = decode_into(reinterpret_cast<const std::uint8_t*>(b.data()), b.size(), info.has_alpha,
                              img->pixels.data(), static_cast<int>(info.width), static_cast<int>(info.height));
  if (st != VP8_STATUS_OK) return status_error(st, "decode");
  if (info.has_alpha) rgba_to_rgb_on_white(img->pixels, std::size_t{info.width} * info.height);
  return img;
}

}  // namespace loom::media::detail
