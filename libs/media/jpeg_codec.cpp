// JPEG through libjpeg(-turbo). Its errors longjmp out of error_exit; so do
// the warnings that mean the data is cut or damaged (emit_message below).
// As in png_codec.cpp every libjpeg call runs inside a C-style function
// (*_c) whose frame holds no C++ object with a destructor; state that must
// survive the jump lives in a plain struct the C++ caller owns and releases.
#include "libs/media/codecs.hpp"
#include "libs/media/reject.hpp"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE and size_t first
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace loom::media::detail {
namespace {

enum fail_kind { fail_none = 0, fail_truncated, fail_corrupt, fail_colour, fail_memory };

struct jpeg_err {
  jpeg_error_mgr pub;
  std::jmp_buf jump;
  int kind;
  char message[JMSG_LENGTH_MAX];
};

int kind_of_error(int code) {
  switch (code) {
    case JERR_INPUT_EMPTY: return fail_truncated;
    case JERR_BAD_PRECISION:
    case JERR_CONVERSION_NOTIMPL:
    case JERR_BAD_J_COLORSPACE: return fail_colour;
    case JERR_OUT_OF_MEMORY:
    case JERR_NO_BACKING_STORE: return fail_memory;
    default: return fail_corrupt;
  }
}

[[noreturn]] void fail(j_common_ptr c, int kind) {
  auto* e = reinterpret_cast<jpeg_err*>(c->err);
  e->kind = kind;
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

void error_exit(j_common_ptr c) { fail(c, kind_of_error(c->err->msg_code)); }

// Warnings (level -1). With jpeg_mem_src a cut file shows up as "Premature
// end of JPEG file" (and libjpeg would pad the rest with grey): truncated.
// Damaged entropy-coded data: corrupt. The rest (extraneous bytes before a
// marker, odd JFIF versions, bogus ICC or progression) are common in real
// files that decode fine: counted and ignored.
void emit_message(j_common_ptr c, int level) {
  if (level >= 0) return;  // trace messages
  switch (c->err->msg_code) {
    case JWRN_JPEG_EOF:
    case JWRN_HIT_MARKER: fail(c, fail_truncated);
    case JWRN_HUFF_BAD_CODE:
    case JWRN_ARITH_BAD_CODE:
    case JWRN_MUST_RESYNC:
    case JWRN_NOT_SEQUENTIAL: fail(c, fail_corrupt);
    default: ++c->err->num_warnings;
  }
}

void install(jpeg_err* e) {
  jpeg_std_error(&e->pub);
  e->pub.error_exit = error_exit;
  e->pub.emit_message = emit_message;
  e->kind = fail_none;
  e->message[0] = '\0';
}

struct jpeg_reader {
  jpeg_decompress_struct cinfo;
  jpeg_err err;
  int created;
};

// A growing malloc'd buffer as libjpeg destination (jpeg_mem_dest frees its
// buffer on growth, which leaves nothing safe to free after an error).
struct mem_dest {
  jpeg_destination_mgr pub;
  unsigned char* buf;
  std::size_t cap;
};

struct jpeg_writer {
  jpeg_compress_struct cinfo;
  jpeg_err err;
  mem_dest dest;
  int created;
};

void dest_init(j_compress_ptr c) {
  auto* d = reinterpret_cast<mem_dest*>(c->dest);
  d->cap = 65536;
  d->buf = static_cast<unsigned char*>(std::malloc(d->cap));
  if (!d->buf) ERREXIT1(c, JERR_OUT_OF_MEMORY, 0);
  d->pub.next_output_byte = d->buf;
  d->pub.free_in_buffer = d->cap;
}
boolean dest_grow(j_compress_ptr c) {
  auto* d = reinterpret_cast<mem_dest*>(c->dest);
  auto* grown = static_cast<unsigned char*>(std::realloc(d->buf, d->cap * 2));
  if (!grown) ERREXIT1(c, JERR_OUT_OF_MEMORY, 1);
  d->buf = grown;
  d->pub.next_output_byte = d->buf + d->cap;
  d->pub.free_in_buffer = d->cap;
  d->cap *= 2;
  return TRUE;
}
void dest_term(j_compress_ptr) {}

int read_head_c(jpeg_reader* r, const unsigned char* data, unsigned long size) {
  r->cinfo.err = &r->err.pub;
  install(&r->err);
  if (setjmp(r->err.jump)) return -1;
  jpeg_create_decompress(&r->cinfo);
  r->created = 1;
  jpeg_mem_src(&r->cinfo, data, size);
  jpeg_read_header(&r->cinfo, TRUE);
  return 0;
}

// CMYK as libjpeg outputs it -> RGB8. Adobe's writers store the inks
// inverted (0 = full ink), which their APP14 marker tells.
void cmyk_row_to_rgb(const unsigned char* in, unsigned char* out, unsigned w, int adobe) {
  for (unsigned x = 0; x < w; ++x, in += 4, out += 3) {
    const unsigned k = adobe ? in[3] : 255u - in[3];
    for (int i = 0; i < 3; ++i) {
      const unsigned c = adobe ? in[i] : 255u - in[i];
      out[i] = static_cast<unsigned char>((c * k + 127) / 255);
    }
  }
}

// out: w * h * 3 bytes; cmyk_row: w * 4 bytes when the file is CMYK/YCCK.
int read_pixels_c(jpeg_reader* r, unsigned char* out, unsigned char* cmyk_row, long memory_cap) {
  j_decompress_ptr c = &r->cinfo;
  if (setjmp(r->err.jump)) return -1;
  c->mem->max_memory_to_use = memory_cap;
  c->out_color_space = cmyk_row ? JCS_CMYK : JCS_RGB;
  jpeg_start_decompress(c);
  if (c->output_components != (cmyk_row ? 4 : 3)) ERREXIT(c, JERR_CONVERSION_NOTIMPL);
  const std::size_t stride = std::size_t{c->output_width} * 3;
  while (c->output_scanline < c->output_height) {
    unsigned char* dst = out + stride * c->output_scanline;
    JSAMPROW row = cmyk_row ? cmyk_row : dst;
    if (jpeg_read_scanlines(c, &row, 1) != 1) ERREXIT(c, JERR_INPUT_EMPTY);
    if (cmyk_row) cmyk_row_to_rgb(cmyk_row, dst, c->output_width, c->saw_Adobe_marker);
  }
  jpeg_finish_decompress(c);  // reads to EOI: a file cut after the last scan line fails here
  return 0;
}

int write_c(jpeg_writer* w, const unsigned char* px, unsigned width, unsigned height, int quality) {
  w->cinfo.err = &w->err.pub;
  install(&w->err);
  if (setjmp(w->err.jump)) return -1;
  jpeg_create_compress(&w->cinfo);
  w->created = 1;
  w->dest.pub.init_destination = dest_init;
  w->dest.pub.empty_output_buffer = dest_grow;
  w->dest.pub.term_destination = dest_term;
  w->cinfo.dest = &w->dest.pub;
  w->cinfo.image_width = width;
  w->cinfo.image_height = height;
  w->cinfo.input_components = 3;
  w->cinfo.in_color_space = JCS_RGB;
  jpeg_set_defaults(&w->cinfo);
  jpeg_set_quality(&w->cinfo, quality, TRUE);
  w->cinfo.write_JFIF_header = FALSE;  // no APPn segment of any kind
  w->cinfo.write_Adobe_marker = FALSE;
  jpeg_start_compress(&w->cinfo, TRUE);
  while (w->cinfo.next_scanline < height) {
    JSAMPROW row = const_cast<unsigned char*>(px) + std::size_t{w->cinfo.next_scanline} * width * 3;
    jpeg_write_scanlines(&w->cinfo, &row, 1);
  }
  jpeg_finish_compress(&w->cinfo);
  return 0;
}

error read_failure(const jpeg_err& e) {
  const std::string msg = std::string("jpeg: ") + e.message;
  switch (e.kind) {
    case fail_truncated: return reject(reject_reason::truncated, msg);
    case fail_colour: return reject(reject_reason::unsupported_colour, msg);
    case fail_memory: return reject(reject_reason::too_large, msg + " (over the decode memory cap)");
    default: return reject(reject_reason::corrupt, msg);
  }
}

struct reader_guard {
  jpeg_reader& r;
  ~reader_guard() {
    if (r.created) jpeg_destroy_decompress(&r.cinfo);
  }
};

}  // namespace

result<image_info> jpeg_info(std::string_view b) {
  jpeg_reader r{};
  reader_guard guard{r};
  if (read_head_c(&r, reinterpret_cast<const unsigned char*>(b.data()), b.size()) != 0) return read_failure(r.err);
  const auto& c = r.cinfo;
  image_info info;
  info.fmt = format::jpeg;
  info.width = c.image_width;
  info.height = c.image_height;
  info.channels = c.num_components;
  info.bit_depth = c.data_precision;
  switch (c.jpeg_color_space) {
    case JCS_GRAYSCALE: info.colour = colour_model::gray; break;
    case JCS_YCbCr:
    case JCS_RGB: info.colour = colour_model::rgb; break;
    case JCS_CMYK:
    case JCS_YCCK: info.colour = colour_model::cmyk; break;
    default:
      return reject(reject_reason::unsupported_colour,
                    "jpeg: " + std::to_string(c.num_components) + " components of unknown colour space");
  }
  if (c.data_precision != 8)
    return reject(reject_reason::unsupported_colour, "jpeg: " + std::to_string(c.data_precision) + "-bit samples");
  return info;
}

result<image> jpeg_decode(std::string_view b, const image_info& info) {
  jpeg_reader r{};
  reader_guard guard{r};
  if (read_head_c(&r, reinterpret_cast<const unsigned char*>(b.data()), b.size()) != 0) return read_failure(r.err);
  if (r.cinfo.image_width != info.width || r.cinfo.image_height != info.height)
    return reject(reject_reason::corrupt, "jpeg: header disagrees with the probe");
  auto img = allocate(info.width, info.height, 3);
  if (!img) return img.err();
  std::vector<unsigned char> cmyk_row(info.colour == colour_model::cmyk ? std::size_t{info.width} * 4 : 0);
  // libjpeg's own pool: a progressive file holds every coefficient (2 bytes
  // per sample, <= 6 B/px at 4:4:4); 16 MiB covers tables and row buffers.
  const long cap = static_cast<long>(std::size_t{info.width} * info.height * 6 + (16u << 20));
  if (read_pixels_c(&r, img->pixels.data(), cmyk_row.empty() ? nullptr : cmyk_row.data(), cap) != 0)
    return read_failure(r.err);
  return img;
}

}  // namespace loom::media::detail

namespace loom::media {

result<std::string> encode_jpeg(const image& img, int quality) {
  using namespace detail;
  if (quality < 1 || quality > 100) return make_error(errc::invalid_argument, "encode_jpeg: quality outside 1..100");
  if (img.width == 0 || img.height == 0 || img.pixels.size() != std::size_t{img.width} * img.height * 3)
    return make_error(errc::invalid_argument, "encode_jpeg: pixels do not match width x height x 3");
  jpeg_writer w{};
  struct release {
    jpeg_writer& w;
    ~release() {
      if (w.created) jpeg_destroy_compress(&w.cinfo);
      std::free(w.dest.buf);
    }
  } release_on_exit{w};
  if (write_c(&w, img.pixels.data(), img.width, img.height, quality) != 0)
    return make_error(errc::internal, std::string("encode_jpeg: ") + w.err.message);
  return std::string(reinterpret_cast<const char*>(w.dest.buf), w.dest.cap - w.dest.pub.free_in_buffer);
}

}  // namespace loom::media
