#include "libs/media/fixtures.hpp"

// clang-format off
#include <cstdio>
#include <jpeglib.h>
// clang-format on
#include <gif_lib.h>
#include <libexif/exif-data.h>
#include <png.h>
#include <webp/encode.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>

namespace loom::media::testing {
namespace {

void put_le24(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 3; ++i) s += static_cast<char>(v >> (8 * i));
}
void put_le32(std::string& s, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) s += static_cast<char>(v >> (8 * i));
}
std::string riff_chunk(std::string_view fourcc, std::string_view data) {
  std::string s(fourcc);
  put_le32(s, static_cast<std::uint32_t>(data.size()));
  s += data;
  if (data.size() & 1) s += '\0';
  return s;
}
std::string riff_webp(const std::string& body) {
  std::string s = "RIFF";
  put_le32(s, static_cast<std::uint32_t>(body.size() + 4));
  return s + "WEBP" + body;
}
std::string take_webp(std::uint8_t* out, std::size_t n) {
  if (n == 0) std::abort();
  std::string s(reinterpret_cast<const char*>(out), n);
  WebPFree(out);
  return s;
}
// VP8X: flags, 3 reserved bytes, canvas width - 1 and height - 1 (24 bits each).
std::string vp8x(std::uint8_t flags, std::uint32_t w, std::uint32_t h) {
  std::string d(1, static_cast<char>(flags));
  d.append(3, '\0');
  put_le24(d, w - 1);
  put_le24(d, h - 1);
  return riff_chunk("VP8X", d);
}

void png_append(png_structp png, png_bytep data, std::size_t n) {
  static_cast<std::string*>(png_get_io_ptr(png))->append(reinterpret_cast<const char*>(data), n);
}
void png_no_flush(png_structp) {}

int gif_append(GifFileType* g, const GifByteType* data, int n) {
  static_cast<std::string*>(g->UserData)->append(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n));
  return n;
}

void add_entry(ExifMem* mem, ExifContent* ifd, ExifTag tag, ExifFormat fmt, unsigned long components,
               const void* data, unsigned size) {
  ExifEntry* e = exif_entry_new_mem(mem);
  e->tag = tag;
  e->format = fmt;
  e->components = components;
  e->size = size;
  e->data = static_cast<unsigned char*>(exif_mem_alloc(mem, size));
  std::memcpy(e->data, data, size);
  exif_content_add_entry(ifd, e);
  exif_entry_unref(e);
}

}  // namespace

std::string png_raw(std::uint32_t w, std::uint32_t h, int color_type, int bit_depth, bool interlace,
                    const std::vector<std::uint8_t>& packed_rows, const std::vector<std::array<std::uint8_t, 3>>& palette,
                    const std::vector<std::uint8_t>& trns) {
  std::string out;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, nullptr, nullptr, nullptr);
  png_infop info = png_create_info_struct(png);
  png_set_write_fn(png, &out, png_append, png_no_flush);
  png_set_IHDR(png, info, w, h, bit_depth, color_type, interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  std::vector<png_color> plte;
  for (const auto& p : palette) plte.push_back({p[0], p[1], p[2]});
  if (!plte.empty()) png_set_PLTE(png, info, plte.data(), static_cast<int>(plte.size()));
  if (!trns.empty()) png_set_tRNS(png, info, trns.data(), static_cast<int>(trns.size()), nullptr);
  png_write_info(png, info);
  const std::size_t stride = packed_rows.size() / h;
  std::vector<png_bytep> rows(h);
  for (std::uint32_t y = 0; y < h; ++y) rows[y] = const_cast<png_bytep>(packed_rows.data() + y * stride);
  png_write_image(png, rows.data());
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return out;
}

std::string png_chunk(std::string_view type, std::string_view data) {
  std::string s;
  const auto n = static_cast<std::uint32_t>(data.size());
  for (int i = 3; i >= 0; --i) s += static_cast<char>(n >> (8 * i));
  s += type;
  s += data;
  const auto crc = crc32(crc32(0, reinterpret_cast<const Bytef*>(type.data()), 4),
                         reinterpret_cast<const Bytef*>(data.data()), static_cast<uInt>(data.size()));
  for (int i = 3; i >= 0; --i) s += static_cast<char>(crc >> (8 * i));
  return s;
}

std::string png_insert_after_ihdr(const std::string& png, const std::vector<std::string>& chunks) {
  std::string out = png.substr(0, 33);
  for (const auto& c : chunks) out += c;
  return out + png.substr(33);
}

std::string webp_lossless(const image& img) {
  std::uint8_t* out = nullptr;
  const auto n = WebPEncodeLosslessRGB(img.pixels.data(), static_cast<int>(img.width), static_cast<int>(img.height),
                                       static_cast<int>(img.stride()), &out);
  return take_webp(out, n);
}

std::string webp_lossless_rgba(std::uint32_t w, std::uint32_t h, const std::vector<std::uint8_t>& rgba) {
  std::uint8_t* out = nullptr;
  const auto n = WebPEncodeLosslessRGBA(rgba.data(), static_cast<int>(w), static_cast<int>(h), static_cast<int>(w * 4), &out);
  return take_webp(out, n);
}

std::string webp_lossy(const image& img, float quality) {
  std::uint8_t* out = nullptr;
  const auto n = WebPEncodeRGB(img.pixels.data(), static_cast<int>(img.width), static_cast<int>(img.height),
                               static_cast<int>(img.stride()), quality, &out);
  return take_webp(out, n);
}

std::string webp_with_chunks(const image& img, const std::vector<std::pair<std::string, std::string>>& chunks) {
  const std::string still = webp_lossless(img).substr(12);  // the VP8L chunk
  std::uint8_t flags = 0;
  for (const auto& [fourcc, data] : chunks) {
    if (fourcc == "EXIF") flags |= 0x08;
    if (fourcc == "XMP ") flags |= 0x04;
    if (fourcc == "ICCP") flags |= 0x20;
  }
  std::string body = vp8x(flags, img.width, img.height);
  for (const auto& [fourcc, data] : chunks)
    if (fourcc == "ICCP") body += riff_chunk(fourcc, data);
  body += still;
  for (const auto& [fourcc, data] : chunks)
    if (fourcc != "ICCP") body += riff_chunk(fourcc, data);
  return riff_webp(body);
}

std::string webp_animated(std::uint32_t cw, std::uint32_t ch, std::uint32_t fw, std::uint32_t fh,
                          const std::vector<std::uint8_t>& first, std::uint32_t x, std::uint32_t y) {
  std::vector<std::uint8_t> red_px(std::size_t{fw} * fh * 4, 0);
  for (std::size_t i = 0; i < red_px.size(); i += 4) red_px[i] = red_px[i + 3] = 255;
  const std::vector<std::uint8_t>& red = red_px;
  std::string body = vp8x(0x02 | 0x10, cw, ch);
  body += riff_chunk("ANIM", std::string(6, '\0'));
  for (const auto* px : {&first, &red}) {
    std::string frame;
    put_le24(frame, x / 2);  // offsets are stored halved (so must be even)
    put_le24(frame, y / 2);
    put_le24(frame, fw - 1);
    put_le24(frame, fh - 1);
    put_le24(frame, 100);  // duration, ms
    frame += '\0';         // alpha-blend, no dispose
    frame += webp_lossless_rgba(fw, fh, *px).substr(12);
    body += riff_chunk("ANMF", frame);
  }
  return riff_webp(body);
}

std::string gif(std::uint32_t sw, std::uint32_t sh, const std::vector<std::array<std::uint8_t, 3>>& palette,
                const std::vector<gif_frame>& frames) {
  std::string out;
  int err = 0;
  GifFileType* g = EGifOpen(&out, gif_append, &err);
  std::vector<GifColorType> colours;
  for (const auto& p : palette) colours.push_back({p[0], p[1], p[2]});
  ColorMapObject* map = GifMakeMapObject(static_cast<int>(colours.size()), colours.data());
  if (!g || !map) std::abort();
  EGifSetGifVersion(g, true);
  int bits = 1;
  while ((1 << bits) < static_cast<int>(colours.size())) ++bits;
  if (EGifPutScreenDesc(g, static_cast<int>(sw), static_cast<int>(sh), bits, 0, map) == GIF_ERROR) std::abort();
  for (const auto& f : frames) {
    GraphicsControlBlock gcb{DISPOSAL_UNSPECIFIED, false, 10, f.transparent};
    GifByteType ext[4];
    EGifGCBToExtension(&gcb, ext);
    EGifPutExtension(g, GRAPHICS_EXT_FUNC_CODE, 4, ext);
    EGifPutImageDesc(g, static_cast<int>(f.left), static_cast<int>(f.top), static_cast<int>(f.w),
                     static_cast<int>(f.h), f.interlace, nullptr);
    std::vector<std::uint32_t> order;
    if (f.interlace) {
      for (auto [start, step] : {std::pair{0u, 8u}, {4u, 8u}, {2u, 4u}, {1u, 2u}})
        for (std::uint32_t r = start; r < f.h; r += step) order.push_back(r);
    } else {
      for (std::uint32_t r = 0; r < f.h; ++r) order.push_back(r);
    }
    for (auto r : order) {
      auto* line = const_cast<GifPixelType*>(f.indices.data() + std::size_t{r} * f.w);
      if (EGifPutLine(g, line, static_cast<int>(f.w)) == GIF_ERROR) std::abort();
    }
  }
  if (EGifCloseFile(g, &err) == GIF_ERROR) std::abort();
  GifFreeMapObject(map);
  return out;
}

namespace {

// libjpeg with its default error manager (exit on error: only our own valid input).
std::string jpeg_encode(std::uint32_t w, std::uint32_t h, int components, J_COLOR_SPACE space, int quality,
                        bool progressive, const std::uint8_t* px) {
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* buf = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &buf, &size);
  c.image_width = w;
  c.image_height = h;
  c.input_components = components;
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, quality, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < h) {
    JSAMPROW row = const_cast<JSAMPROW>(px + std::size_t{c.next_scanline} * w * components);
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  std::string out(reinterpret_cast<const char*>(buf), size);
  jpeg_destroy_compress(&c);
  std::free(buf);
  return out;
}

}  // namespace

std::string jpeg_cmyk(std::uint32_t w, std::uint32_t h, const std::vector<std::uint8_t>& cmyk) {
  return jpeg_encode(w, h, 4, JCS_CMYK, 95, false, cmyk.data());
}

std::string jpeg_progressive(const image& img, int quality) {
  return jpeg_encode(img.width, img.height, 3, JCS_RGB, quality, true, img.pixels.data());
}

std::string exif_block() {
  ExifMem* mem = exif_mem_new_default();
  ExifData* ed = exif_data_new_mem(mem);
  exif_data_unset_option(ed, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
  exif_data_set_byte_order(ed, EXIF_BYTE_ORDER_INTEL);
  const char artist[] = "Jane Example";
  add_entry(mem, ed->ifd[EXIF_IFD_0], EXIF_TAG_ARTIST, EXIF_FORMAT_ASCII, sizeof artist, artist, sizeof artist);
  const char owner[] = "J. Example";
  add_entry(mem, ed->ifd[EXIF_IFD_EXIF], EXIF_TAG_CAMERA_OWNER_NAME, EXIF_FORMAT_ASCII, sizeof owner, owner,
            sizeof owner);
  const char ref[] = "N";
  add_entry(mem, ed->ifd[EXIF_IFD_GPS], static_cast<ExifTag>(EXIF_TAG_GPS_LATITUDE_REF), EXIF_FORMAT_ASCII,
            sizeof ref, ref, sizeof ref);
  unsigned char lat[24];
  const ExifRational parts[3] = {{52, 1}, {31, 1}, {1234, 100}};
  for (int i = 0; i < 3; ++i) exif_set_rational(lat + 8 * i, EXIF_BYTE_ORDER_INTEL, parts[i]);
  add_entry(mem, ed->ifd[EXIF_IFD_GPS], static_cast<ExifTag>(EXIF_TAG_GPS_LATITUDE), EXIF_FORMAT_RATIONAL, 3, lat,
            sizeof lat);
  unsigned char* buf = nullptr;
  unsigned int size = 0;
  exif_data_save_data(ed, &buf, &size);
  if (!buf) std::abort();
  std::string out(reinterpret_cast<const char*>(buf), size);
  exif_mem_free(mem, buf);
  exif_data_unref(ed);
  exif_mem_unref(mem);
  return out;
}

std::string jpeg_insert_after_soi(const std::string& jpeg, const std::vector<std::pair<int, std::string>>& segments) {
  std::string out = jpeg.substr(0, 2);
  for (const auto& [marker, payload] : segments) {
    const auto len = static_cast<std::uint32_t>(payload.size() + 2);
    out += '\xFF';
    out += static_cast<char>(marker);
    out += static_cast<char>(len >> 8);
    out += static_cast<char>(len & 0xFF);
    out += payload;
  }
  return out + jpeg.substr(2);
}

}  // namespace loom::media::testing
