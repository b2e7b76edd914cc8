// GIF through giflib: the header facts from our own block walk
// (containers.hpp), pixels from DGifOpen on a memory read callback and the
// record API, frame 1 only. (DGifSlurp would decode and keep every frame: a
// 1000-frame file would cost 1000 rasters, so it is not used.) giflib
// reports errors by return codes; no longjmp.
#include "libs/media/codecs.hpp"
#include "libs/media/containers.hpp"
#include "libs/media/reject.hpp"

#include <gif_lib.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace loom::media::detail {
namespace {

struct gif_source {
  const unsigned char* data;
  std::size_t size, pos;
};

int read_bytes(GifFileType* g, GifByteType* out, int n) {
  auto* s = static_cast<gif_source*>(g->UserData);
  const std::size_t k = std::min<std::size_t>(static_cast<std::size_t>(n), s->size - s->pos);
  std::memcpy(out, s->data + s->pos, k);
  s->pos += k;
  return static_cast<int>(k);  // short: giflib fails with D_GIF_ERR_READ_FAILED
}

error gif_error(int code) {
  const char* text = GifErrorString(code);
  const std::string msg = std::string("gif: ") + (text ? text : "error " + std::to_string(code));
  if (code == D_GIF_ERR_READ_FAILED) return reject(reject_reason::truncated, msg);
  if (code == D_GIF_ERR_NOT_ENOUGH_MEM) return make_error(errc::internal, msg);
  return reject(reject_reason::corrupt, msg);
}

struct closer {
  void operator()(GifFileType* g) const {
    int err = 0;
    DGifCloseFile(g, &err);
  }
};

}  // namespace

result<image_info> gif_info(std::string_view b) {
  gif_layout g;
  const auto end = walk_gif(b, g, [](unsigned char, std::string_view) {});
  if (end == walk_end::truncated) return reject(reject_reason::truncated, "gif: ends before its trailer");
  if (end == walk_end::corrupt) return reject(reject_reason::corrupt, "gif: unknown block or LZW code size");
  if (g.frames == 0) return reject(reject_reason::corrupt, "gif: no image");
  image_info info;
  info.fmt = format::gif;
  // The canvas is the logical screen, grown to frame 1's size when that is
  // larger (broken writers): the limits then cover what is decoded.
  info.width = std::max(g.screen_w, g.frame_w);
  info.height = std::max(g.screen_h, g.frame_h);
  if (info.width == 0 || info.height == 0) return reject(reject_reason::corrupt, "gif: empty screen and frame");
  info.colour = colour_model::palette;
  info.has_alpha = g.transparency;
  info.channels = g.transparency ? 4 : 3;
  info.bit_depth = g.colour_bits;
  info.frames = g.frames;
  return info;
}

result<image> gif_decode(std::string_view b, const image_info& info) {
  gif_source src{reinterpret_cast<const unsigned char*>(b.data()), b.size(), 0};
  int err = 0;
  std::unique_ptr<GifFileType, closer> g(DGifOpen(&src, read_bytes, &err));
  if (!g) return gif_error(err);
  int transparent = -1;
  while (true) {
    GifRecordType type;
    if (DGifGetRecordType(g.get(), &type) == GIF_ERROR) return gif_error(g->Error);
    if (type == TERMINATE_RECORD_TYPE) return reject(reject_reason::corrupt, "gif: no image");
    if (type == IMAGE_DESC_RECORD_TYPE) break;
    if (type != EXTENSION_RECORD_TYPE) continue;
    int code = 0;
    GifByteType* ext = nullptr;
    if (DGifGetExtension(g.get(), &code, &ext) == GIF_ERROR) return gif_error(g->Error);
    if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4) transparent = (ext[1] & 1) ? ext[4] : -1;
    while (ext)
      if (DGifGetExtensionNext(g.get(), &ext) == GIF_ERROR) return gif_error(g->Error);
  }
  if (DGifGetImageDesc(g.get()) == GIF_ERROR) return gif_error(g->Error);
  const GifImageDesc& d = g->Image;
  const ColorMapObject* map = d.ColorMap ? d.ColorMap : g->SColorMap;
  if (!map) return reject(reject_reason::corrupt, "gif: frame 1 has no colour map");
  if (d.Width <= 0 || d.Height <= 0) return reject(reject_reason::corrupt, "gif: empty frame");
  auto img = allocate(info.width, info.height, 3);
  if (!img) return img.err();
  std::fill(img->pixels.begin(), img->pixels.end(), std::uint8_t{255});
  std::vector<GifPixelType> line(static_cast<std::size_t>(d.Width));
  // Interlaced frames store rows in four passes: every 8th from 0, every 8th
  // from 4, every 4th from 2, every 2nd from 1.
  static constexpr int start[] = {0, 4, 2, 1}, step[] = {8, 8, 4, 2};
  const int passes = d.Interlace ? 4 : 1;
  for (int p = 0; p < passes; ++p) {
    for (int y = d.Interlace ? start[p] : 0; y < d.Height; y += d.Interlace ? step[p] : 1) {
      if (DGifGetLine(g.get(), line.data(), d.Width) == GIF_ERROR) return gif_error(g->Error);
      const long cy = static_cast<long>(d.Top) + y;
      if (cy >= static_cast<long>(info.height)) continue;
      std::uint8_t* row = img->row(static_cast<std::uint32_t>(cy));
      for (int x = 0; x < d.Width; ++x) {
        const long cx = static_cast<long>(d.Left) + x;
        const int idx = line[static_cast<std::size_t>(x)];
        if (cx >= static_cast<long>(info.width) || idx == transparent || idx >= map->ColorCount) continue;
        const GifColorType c = map->Colors[idx];
        row[cx * 3] = c.Red;
        row[cx * 3 + 1] = c.Green;
        row[cx * 3 + 2] = c.Blue;
      }
    }
  }
  return img;
}

}  // namespace loom::media::detail
