#include "libs/media/probe.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/fixtures.hpp"
#include "libs/media/reject.hpp"
#include "libs/media/testing.hpp"

#include <doctest/doctest.h>

#include <png.h>

using namespace loom::media;
using namespace loom::media::testing;

namespace {

std::string jpeg_of(const image& img) {
  auto j = encode_jpeg(img, 90);
  REQUIRE(j.ok());
  return *j;
}
std::string png_of(const image& img) {
  auto p = encode_png(img);
  REQUIRE(p.ok());
  return *p;
}

}  // namespace

TEST_CASE("sniff tells the four formats apart by their magic bytes and nothing else") {
  const image img = scene(1, 16, 8);
  CHECK(sniff(png_of(img)) == format::png);
  CHECK(sniff(jpeg_of(img)) == format::jpeg);
  CHECK(sniff(webp_lossless(img)) == format::webp);
  CHECK(sniff(gif(4, 4, {{0, 0, 0}, {255, 255, 255}}, {{0, 0, 4, 4, std::vector<std::uint8_t>(16, 1)}})) ==
        format::gif);
  CHECK_FALSE(sniff("BM\x36\x00\x00\x00").has_value());
  CHECK_FALSE(sniff("").has_value());
  CHECK_FALSE(sniff("RIFF\x10\x00\x00\x00WAVEfmt ").has_value());
}

TEST_CASE("probe reads size, colour, alpha, depth and frames from the headers") {
  const image img = scene(2, 40, 30);
  auto p = probe(png_of(img));
  REQUIRE(p.ok());
  CHECK(p->fmt == format::png);
  CHECK(p->width == 40);
  CHECK(p->height == 30);
  CHECK(p->colour == colour_model::rgb);
  CHECK(p->channels == 3);
  CHECK_FALSE(p->has_alpha);
  CHECK(p->bit_depth == 8);
  CHECK(p->frames == 1);

  const std::vector<std::uint8_t> gray16(40 * 30 * 2, 0x80);
  p = probe(png_raw(40, 30, PNG_COLOR_TYPE_GRAY, 16, false, gray16));
  REQUIRE(p.ok());
  CHECK(p->colour == colour_model::gray);
  CHECK(p->channels == 1);
  CHECK(p->bit_depth == 16);

  const std::vector<std::uint8_t> idx(40 * 30, 1);
  p = probe(png_raw(40, 30, PNG_COLOR_TYPE_PALETTE, 8, false, idx, {{0, 0, 0}, {9, 9, 9}}, {0, 255}));
  REQUIRE(p.ok());
  CHECK(p->colour == colour_model::palette);
  CHECK(p->has_alpha);  // from tRNS
  CHECK(p->channels == 4);

  p = probe(jpeg_of(img));
  REQUIRE(p.ok());
  CHECK(p->fmt == format::jpeg);
  CHECK(p->width == 40);
  CHECK(p->height == 30);
  CHECK(p->channels == 3);
  CHECK(p->bit_depth == 8);

  std::vector<std::uint8_t> rgba(40 * 30 * 4, 200);
  p = probe(webp_lossless_rgba(40, 30, rgba));
  REQUIRE(p.ok());
  CHECK(p->fmt == format::webp);
  CHECK(p->width == 40);
  CHECK(p->has_alpha);

  p = probe(webp_animated(64, 48, 20, 10, std::vector<std::uint8_t>(20 * 10 * 4, 255), 4, 6));
  REQUIRE(p.ok());
  CHECK(p->width == 64);
  CHECK(p->height == 48);
  CHECK(p->frames == 2);

  gif_frame f{0, 0, 10, 5, std::vector<std::uint8_t>(50, 1), 0};
  p = probe(gif(12, 7, {{0, 0, 0}, {1, 2, 3}, {4, 5, 6}, {7, 8, 9}}, {f, f, f}));
  REQUIRE(p.ok());
  CHECK(p->fmt == format::gif);
  CHECK(p->width == 12);
  CHECK(p->height == 7);
  CHECK(p->frames == 3);
  CHECK(p->has_alpha);
  CHECK(p->bit_depth == 2);
}

TEST_CASE("the limits refuse by width, height, pixel count and file size") {
  const std::string png = png_of(scene(3, 200, 100));
  limits lim;
  lim.max_width = 199;
  auto p = probe(png, lim);
  REQUIRE_FALSE(p.ok());
  CHECK(reason_of(p.err()) == reject_reason::too_large);
  lim = {};
  lim.max_height = 99;
  CHECK(reason_of(probe(png, lim).err()) == reject_reason::too_large);
  lim = {};
  lim.max_pixels = 19'999;
  CHECK(reason_of(probe(png, lim).err()) == reject_reason::too_large);
  lim.max_pixels = 20'000;
  CHECK(probe(png, lim).ok());
  lim.max_file_bytes = png.size() - 1;
  CHECK(reason_of(probe(png, lim).err()) == reject_reason::too_large);
  CHECK(reason_of(decode(png, lim).err()) == reject_reason::too_large);
}

TEST_CASE("a file extension must agree with the magic bytes") {
  CHECK(check_extension("photo.jpg", format::jpeg).ok());
  CHECK(check_extension("dir.d/photo.JPEG", format::jpeg).ok());
  CHECK(check_extension(".jpe", format::jpeg).ok());
  CHECK(check_extension("png", format::png).ok());
  CHECK(check_extension("a/b/anim.webp", format::webp).ok());
  CHECK(check_extension("x.GIF", format::gif).ok());
  CHECK(check_extension("no_extension", format::gif).ok());
  CHECK(check_extension("", format::png).ok());
  const auto st = check_extension("shard-0001/0042.jpg", format::png);
  REQUIRE_FALSE(st.ok());
  CHECK(reason_of(st.err()) == reject_reason::extension_mismatch);
  CHECK(st.err().message == "extension_mismatch: name says .jpg but the bytes are png");
  CHECK_FALSE(check_extension("cat.txt", format::png).ok());
  CHECK_FALSE(check_extension("gif", format::webp).ok());
}

TEST_CASE("every reject reason round-trips through the error it makes") {
  for (int i = 0; i < reject_reason_count; ++i) {
    const auto r = static_cast<reject_reason>(i);
    const auto e = reject(r, "detail");
    CHECK(reason_of(e) == r);
    CHECK(e.code == reason_errc(r));
    CHECK(e.message == std::string(reason_code(r)) + ": detail");
  }
  CHECK_FALSE(reason_of(loom::make_error(loom::errc::internal, "truncated: but not ours")).has_value());
  CHECK_FALSE(reason_of(loom::make_error(loom::errc::corruption, "truncatedx")).has_value());
  CHECK(reason_code(reject_reason::unsupported_colour) == "unsupported_colour");
  CHECK(reason_errc(reject_reason::bomb) == loom::errc::resource_exhausted);
}
