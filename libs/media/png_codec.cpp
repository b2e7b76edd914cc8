// PNG through libpng. libpng reports errors by longjmp: every libpng call that
// can fail runs inside a small C-style function below (read_head_c,
// read_pixels_c, write_c) whose frame holds no C++ object with a
// destructor, and all state that must survive the jump lives in a plain
// struct owned by the C++ caller, which releases it after the call returns.
#include "libs/media/codecs.hpp"
#include "libs/media/containers.hpp"
#include "libs/media/reject.hpp"

#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace loom::media::detail {
namespace {

struct png_reader {
  const unsigned char* data = nullptr;
  std::size_t size = 0, pos = 0;
  png_structp png = nullptr;
  png_infop info = nullptr;
  int truncated = 0;  // the read callback ran out of bytes
  char message[160] = {};
};

struct png_writer {
  png_structp png = nullptr;
  png_infop info = nullptr;
  unsigned char* buf = nullptr;  // malloc'd: the write callback runs inside libpng (no C++ allocations there)
  std::size_t size = 0, cap = 0;
  int oom = 0;
  char message[160] = {};
};

void on_error(png_structp png, png_const_charp msg) {
  auto* text = static_cast<char*>(png_get_error_ptr(png));
  std::snprintf(text, 160, "%s", msg);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}  // ancillary damage: libpng recovers and so do we

void read_bytes(png_structp png, png_bytep out, std::size_t n) {
  auto* r = static_cast<png_reader*>(png_get_io_ptr(png));
  if (r->size - r->pos < n) {
    r->truncated = 1;
    png_error(png, "unexpected end of data");
  }
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}

void write_bytes(png_structp png, png_bytep in, std::size_t n) {
  auto* w = static_cast<png_writer*>(png_get_io_ptr(png));
  if (w->cap - w->size < n) {
    std::size_t cap = w->cap ? w->cap * 2 : 65536;
    while (cap - w->size < n) cap *= 2;
    auto* grown = static_cast<unsigned char*>(std::realloc(w->buf, cap));
    if (!grown) {
      w->oom = 1;
      png_error(png, "out of memory");
    }
    w->buf = grown;
    w->cap = cap;
  }
  std::memcpy(w->buf + w->size, in, n);
  w->size += n;
}
void flush_bytes(png_structp) {}

// Header and transforms: any colour type and depth -> RGBA8. 0 on success.
int read_head_c(png_reader* r, png_uint_32 w, png_uint_32 h) {
  r->png = png_create_read_struct(PNG_LIBPNG_VER_STRING, r->message, on_error, on_warning);
  if (!r->png) return -1;
  r->info = png_create_info_struct(r->png);
  if (!r->info) return -1;
  if (setjmp(png_jmpbuf(r->png))) return -1;
  png_set_read_fn(r->png, r, read_bytes);
  png_set_user_limits(r->png, w, h);  // probe() checked these against the caller's limits
  png_read_info(r->png, r->info);
  png_set_expand(r->png);    // palette -> RGB, gray < 8 bit -> 8 bit, tRNS -> alpha
  png_set_scale_16(r->png);  // 16 -> 8 bit, rounded
  png_set_gray_to_rgb(r->png);
  png_set_add_alpha(r->png, 0xff, PNG_FILLER_AFTER);  // only where there is no alpha yet
  png_set_interlace_handling(r->png);
  png_read_update_info(r->png, r->info);
  return 0;
}

int read_pixels_c(png_reader* r, png_bytepp rows) {
  if (setjmp(png_jmpbuf(r->png))) return -1;
  png_read_image(r->png, rows);
  png_read_end(r->png, nullptr);  // the trailing chunks' CRCs and IEND: a cut file fails here
  return 0;
}

int write_c(png_writer* w, const unsigned char* px, png_uint_32 width, png_uint_32 height) {
  w->png = png_create_write_struct(PNG_LIBPNG_VER_STRING, w->message, on_error, on_warning);
  if (!w->png) return -1;
  w->info = png_create_info_struct(w->png);
  if (!w->info) return -1;
  if (setjmp(png_jmpbuf(w->png))) return -1;
  png_set_write_fn(w->png, w, write_bytes, flush_bytes);
  png_set_compression_level(w->png, 6);
  png_set_IHDR(w->png, w->info, width, height, 8, PNG_COLOR_TYPE_RGB, PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(w->png, w->info);
  for (png_uint_32 y = 0; y < height; ++y) png_write_row(w->png, px + std::size_t{y} * width * 3);
  png_write_end(w->png, nullptr);
  return 0;
}

error read_failure(const png_reader& r) {
  if (!r.png || !r.info) return make_error(errc::internal, "png: out of memory");
  return reject(r.truncated ? reject_reason::truncated : reject_reason::corrupt,
                std::string("png: ") + r.message);
}

}  // namespace

result<image_info> png_info(std::string_view b) {
  if (b.size() < 33) return reject(reject_reason::truncated, "png: shorter than signature + IHDR");
  if (be32(b.data() + 8) != 13 || b.substr(12, 4) != "IHDR")
    return reject(reject_reason::corrupt, "png: first chunk is not a 13-byte IHDR");
  const auto crc = crc32(0, reinterpret_cast<const Bytef*>(b.data() + 12), 17);
  if (crc != be32(b.data() + 29)) return reject(reject_reason::corrupt, "png: IHDR CRC mismatch");
  image_info info;
  info.fmt = format::png;
  info.width = be32(b.data() + 16);
  info.height = be32(b.data() + 20);
  info.bit_depth = static_cast<unsigned char>(b[24]);
  const int type = static_cast<unsigned char>(b[25]);
  if (info.width == 0 || info.height == 0 || info.width > 0x7fffffffu || info.height > 0x7fffffffu)
    return reject(reject_reason::corrupt, "png: width or height out of range");
  const int d = info.bit_depth;
  const bool depth_ok = (type == 0 && (d == 1 || d == 2 || d == 4 || d == 8 || d == 16)) ||
                        (type == 3 && (d == 1 || d == 2 || d == 4 || d == 8)) ||
                        ((type == 2 || type == 4 || type == 6) && (d == 8 || d == 16));
  if (!depth_ok) return reject(reject_reason::corrupt, "png: invalid colour type / bit depth");
  info.colour = type == 0 || type == 4 ? colour_model::gray : type == 3 ? colour_model::palette : colour_model::rgb;
  info.channels = type == 0 ? 1 : type == 4 ? 2 : type == 6 ? 4 : 3;
  info.has_alpha = type == 4 || type == 6;
  const auto end = walk_png(b, [&](std::string_view t, std::string_view data) {
    if (t == "tRNS" && !info.has_alpha) {
      info.has_alpha = true;
      ++info.channels;
    }
    if (t == "acTL" && data.size() >= 4) info.frames = std::max<std::uint32_t>(1, be32(data.data()));
    return true;
  });
  if (end == walk_end::truncated) return reject(reject_reason::truncated, "png: a chunk or IEND is missing");
  if (end == walk_end::corrupt) return reject(reject_reason::corrupt, "png: chunk length out of range");
  return info;
}

result<image> png_decode(std::string_view b, const image_info& info) {
  png_reader r;
  r.data = reinterpret_cast<const unsigned char*>(b.data());
  r.size = b.size();
  struct release {
    png_reader& r;
    ~release() { png_destroy_read_struct(&r.png, r.info ? &r.info : nullptr, nullptr); }
  } release_on_exit{r};
  if (read_head_c(&r, info.width, info.height) != 0) return read_failure(r);
  if (png_get_image_width(r.png, r.info) != info.width || png_get_image_height(r.png, r.info) != info.height ||
      png_get_rowbytes(r.png, r.info) != std::size_t{info.width} * 4)
    return reject(reject_reason::corrupt, "png: header disagrees with the probe");
  auto img = allocate(info.width, info.height, 4);  // RGBA, compacted to RGB in place below
  if (!img) return img.err();
  std::vector<png_bytep> rows(info.height);
  for (std::uint32_t y = 0; y < info.height; ++y) rows[y] = img->pixels.data() + std::size_t{y} * info.width * 4;
  if (read_pixels_c(&r, rows.data()) != 0) return read_failure(r);
  rgba_to_rgb_on_white(img->pixels, std::size_t{info.width} * info.height);
  return img;
}

}  // namespace loom::media::detail

namespace loom::media {

result<std::string> encode_png(const image& img) {
  using namespace detail;
  if (img.width == 0 || img.height == 0 || img.pixels.size() != std::size_t{img.width} * img.height * 3)
    return make_error(errc::invalid_argument, "encode_png: pixels do not match width x height x 3");
  png_writer w;
  struct release {
    png_writer& w;
    ~release() {
      png_destroy_write_struct(&w.png, w.info ? &w.info : nullptr);
      std::free(w.buf);
    }
  } release_on_exit{w};
  if (write_c(&w, img.pixels.data(), img.width, img.height) != 0)
    return make_error(errc::internal, std::string("encode_png: ") + (w.png ? w.message : "out of memory"));
  return std::string(reinterpret_cast<const char*>(w.buf), w.size);
}

}  // namespace loom::media
