// libjpeg reports fatal errors by longjmp: as in libs/media/jpeg_codec.cpp,
// every libjpeg call runs in a C-style function (*_c) whose frame holds no
// C++ object with a destructor.
#include "libs/vision/damage.hpp"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
// clang-format on

#include <algorithm>
#include <csetjmp>
#include <cstring>

namespace loom::vision {
namespace {

struct lenient_err {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
};

void error_exit(j_common_ptr c) { std::longjmp(reinterpret_cast<lenient_err*>(c->err)->jump, 1); }
void quiet(j_common_ptr, int) {}  // warnings and trace: a lenient viewer carries on

struct reader {
  jpeg_decompress_struct cinfo;
  lenient_err err;
  int created;
  unsigned width, height;
  unsigned rows;  // scan lines decoded before any fatal error
};

int header_c(reader* r, const unsigned char* data, unsigned long size) {
  r->cinfo.err = jpeg_std_error(&r->err.pub);
  r->err.pub.error_exit = error_exit;
  r->err.pub.emit_message = quiet;
  if (setjmp(r->err.jump)) return -1;
  jpeg_create_decompress(&r->cinfo);
  r->created = 1;
  jpeg_mem_src(&r->cinfo, data, size);
  jpeg_read_header(&r->cinfo, TRUE);
  r->cinfo.out_color_space = JCS_RGB;
  r->width = r->cinfo.image_width;
  r->height = r->cinfo.image_height;
  return 0;
}

// out: width * height * 3, pre-filled grey.
int pixels_c(reader* r, unsigned char* out) {
  j_decompress_ptr c = &r->cinfo;
  if (setjmp(r->err.jump)) return -1;
  jpeg_start_decompress(c);
  if (c->output_components != 3) return -1;
  while (c->output_scanline < c->output_height) {
    JSAMPROW row = out + std::size_t{c->output_width} * 3 * c->output_scanline;
    if (jpeg_read_scanlines(c, &row, 1) != 1) return 0;
    r->rows = c->output_scanline;
  }
  jpeg_finish_decompress(c);
  return 0;
}

// Limits for the generator's own files: nothing near them is ever made.
constexpr unsigned max_side = 8192;

}  // namespace

std::size_t jpeg_scan_start(std::string_view j) {
  for (std::size_t i = 2; i + 4 <= j.size();) {
    if (static_cast<unsigned char>(j[i]) != 0xFF) return 0;
    const unsigned marker = static_cast<unsigned char>(j[i + 1]);
    const std::size_t len = (std::size_t(static_cast<unsigned char>(j[i + 2])) << 8) | static_cast<unsigned char>(j[i + 3]);
    if (marker == 0xDA) return std::min(j.size(), i + 2 + len);
    i += 2 + len;
  }
  return 0;
}

std::string truncate_jpeg(std::string_view jpeg, double keep) {
  const std::size_t s = jpeg_scan_start(jpeg);
  const std::size_t data = jpeg.size() - s;
  return std::string(jpeg.substr(0, s + static_cast<std::size_t>(std::clamp(keep, 0.0, 1.0) * double(data))));
}

std::string flip_jpeg_bytes(std::string_view jpeg, int count, std::mt19937_64& rng) {
  std::string out(jpeg);
  const std::size_t s = jpeg_scan_start(jpeg);
  if (s == 0 || out.size() < s + 4) return out;
  const std::size_t span = out.size() - 2 - s;  // leave EOI alone
  for (int i = 0; i < count; ++i) out[s + rng() % span] ^= static_cast<char>(1 + rng() % 255);
  return out;
}

result<media::image> decode_jpeg_lenient(std::string_view jpeg) {
  reader r{};
  const auto* data = reinterpret_cast<const unsigned char*>(jpeg.data());
  result<media::image> out = make_error(errc::corruption, "jpeg: header unreadable");
  if (header_c(&r, data, static_cast<unsigned long>(jpeg.size())) == 0 && r.width > 0 && r.height > 0 &&
      r.width <= max_side && r.height <= max_side) {
    media::image img = media::make_image(r.width, r.height, 128, 128, 128);
    pixels_c(&r, img.pixels.data());
    out = std::move(img);
  }
  if (r.created) jpeg_destroy_decompress(&r.cinfo);
  return out;
}

}  // namespace loom::vision
