#include "libs/media/codec.hpp"

#include "libs/media/fixtures.hpp"
#include "libs/media/reject.hpp"
#include "libs/media/testing.hpp"

#include <doctest/doctest.h>

#include <png.h>

using namespace loom::media;
using namespace loom::media::testing;

namespace {

image decoded(const std::string& bytes) {
  auto d = decode(bytes);
  if (!d) FAIL(d.err().to_string());
  CHECK(d->pixels.size() == std::size_t{d->width} * d->height * 3);
  return *d;
}

std::array<int, 3> px(const image& img, std::uint32_t x, std::uint32_t y) {
  const auto* p = img.row(y) + std::size_t{x} * 3;
  return {p[0], p[1], p[2]};
}

// (v, a) composited onto white, as decode does it.
int on_white(int v, int a) { return (v * a + 255 * (255 - a) + 127) / 255; }

}  // namespace

TEST_CASE("PNG and lossless WebP round-trip RGB pixels exactly") {
  const image img = scene(10, 97, 61);
  auto png = encode_png(img);
  REQUIRE(png.ok());
  CHECK(decoded(*png).pixels == img.pixels);
  const image back = decoded(webp_lossless(img));
  CHECK(back.width == 97);
  CHECK(back.height == 61);
  CHECK(back.pixels == img.pixels);
}

TEST_CASE("JPEG and lossy WebP decode to the right size and close to the original") {
  const image img = scene(11, 160, 120);
  for (int q : {60, 90}) {
    auto jpg = encode_jpeg(img, q);
    REQUIRE(jpg.ok());
    const image back = decoded(*jpg);
    CHECK(back.width == 160);
    CHECK(back.height == 120);
    const double mae = mean_abs_error(img, back);
    MESSAGE("jpeg q=" << q << " mean abs error " << mae);
    CHECK(mae < (q == 90 ? 5.0 : 8.0));  // hard-edged shapes and noise under 4:2:0; garbage is ~80
  }
  const std::string progressive = jpeg_progressive(img, 90);
  REQUIRE(progressive.find("\xFF\xC2") != std::string::npos);  // SOF2
  CHECK(mean_abs_error(img, decoded(progressive)) < 5.0);
  const image lossy = decoded(webp_lossy(img, 90));
  CHECK(lossy.width == 160);
  CHECK(mean_abs_error(img, lossy) < 5.0);
  CHECK_FALSE(encode_jpeg(img, 0).ok());
  CHECK(encode_jpeg(img, 101).code() == loom::errc::invalid_argument);
}

TEST_CASE("gray, sub-byte palette, 16-bit and alpha PNGs become RGB8") {
  // 8-bit gray, Adam7 interlaced: a horizontal ramp.
  std::vector<std::uint8_t> gray(50 * 20);
  for (std::size_t i = 0; i < gray.size(); ++i) gray[i] = static_cast<std::uint8_t>((i % 50) * 5);
  image g = decoded(png_raw(50, 20, PNG_COLOR_TYPE_GRAY, 8, true, gray));
  CHECK(px(g, 7, 3) == std::array<int, 3>{35, 35, 35});
  CHECK(px(g, 49, 19) == std::array<int, 3>{245, 245, 245});

  // 1-bit gray: 0 -> black, 1 -> white; 8 pixels per byte, MSB first.
  g = decoded(png_raw(16, 2, PNG_COLOR_TYPE_GRAY, 1, false, {0xF0, 0x0F, 0x00, 0xFF}));
  CHECK(px(g, 0, 0) == std::array<int, 3>{255, 255, 255});
  CHECK(px(g, 4, 0) == std::array<int, 3>{0, 0, 0});
  CHECK(px(g, 12, 0) == std::array<int, 3>{255, 255, 255});
  CHECK(px(g, 3, 1) == std::array<int, 3>{0, 0, 0});

  // 2-bit palette with a transparent entry: index 3 -> half-transparent blue on white.
  const std::vector<std::array<std::uint8_t, 3>> pal = {{10, 20, 30}, {200, 0, 0}, {0, 200, 0}, {0, 0, 200}};
  g = decoded(png_raw(4, 1, PNG_COLOR_TYPE_PALETTE, 2, false, {0b00011011}, pal, {255, 255, 255, 128}));
  CHECK(px(g, 0, 0) == std::array<int, 3>{10, 20, 30});
  CHECK(px(g, 1, 0) == std::array<int, 3>{200, 0, 0});
  CHECK(px(g, 3, 0) == std::array<int, 3>{on_white(0, 128), on_white(0, 128), on_white(200, 128)});

  // 16-bit RGB: scaled to 8 bits with rounding (v * 255 / 65535).
  std::vector<std::uint8_t> rgb16 = {0x12, 0x34, 0xFF, 0xFF, 0x00, 0x00, 0x80, 0x00, 0x7F, 0xFF, 0x00, 0x80};
  g = decoded(png_raw(2, 1, PNG_COLOR_TYPE_RGB, 16, false, rgb16));
  CHECK(px(g, 0, 0) == std::array<int, 3>{0x12, 255, 0});
  CHECK(px(g, 1, 0) == std::array<int, 3>{0x80, 0x7F, 0});

  // Gray + alpha and RGBA: composited onto white.
  g = decoded(png_raw(2, 1, PNG_COLOR_TYPE_GRAY_ALPHA, 8, false, {100, 255, 100, 0}));
  CHECK(px(g, 0, 0) == std::array<int, 3>{100, 100, 100});
  CHECK(px(g, 1, 0) == std::array<int, 3>{255, 255, 255});
  g = decoded(png_raw(1, 1, PNG_COLOR_TYPE_RGB_ALPHA, 8, false, {40, 80, 160, 64}));
  CHECK(px(g, 0, 0) == std::array<int, 3>{on_white(40, 64), on_white(80, 64), on_white(160, 64)});
}

TEST_CASE("a grayscale JPEG decodes to equal R, G and B") {
  image img = scene(12, 64, 48);
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) img.pixels[i + 1] = img.pixels[i + 2] = img.pixels[i];
  auto jpg = encode_jpeg(img, 95);
  REQUIRE(jpg.ok());
  const image back = decoded(*jpg);
  CHECK(mean_abs_error(img, back) < 4.0);  // 4:2:0 of a gray image: luma only carries it
}

TEST_CASE("a CMYK JPEG with the Adobe marker converts to RGB") {
  // Adobe stores inverted inks: 255 = no ink. Top half: no ink (white); bottom:
  // full cyan (-> 0, 255, 255) at no black.
  std::vector<std::uint8_t> cmyk(32 * 32 * 4, 255);
  for (std::size_t i = 16 * 32 * 4; i < cmyk.size(); i += 4) cmyk[i] = 0;
  const image back = decoded(jpeg_cmyk(32, 32, cmyk));
  const auto top = px(back, 10, 4), bottom = px(back, 10, 28);
  CHECK(top[0] > 245);
  CHECK(top[1] > 245);
  CHECK(top[2] > 245);
  CHECK(bottom[0] < 10);
  CHECK(bottom[1] > 245);
  CHECK(bottom[2] > 245);
}

TEST_CASE("lossless WebP alpha is composited onto white") {
  std::vector<std::uint8_t> rgba = {0, 0, 0, 255, 0, 0, 0, 0, 255, 0, 0, 100, 20, 40, 60, 255};
  const image g = decoded(webp_lossless_rgba(2, 2, rgba));
  CHECK(px(g, 0, 0) == std::array<int, 3>{0, 0, 0});
  CHECK(px(g, 1, 0) == std::array<int, 3>{255, 255, 255});
  CHECK(px(g, 0, 1) == std::array<int, 3>{255, on_white(0, 100), on_white(0, 100)});
  CHECK(px(g, 1, 1) == std::array<int, 3>{20, 40, 60});
}

TEST_CASE("an animated WebP decodes frame 1 on a white canvas") {
  std::vector<std::uint8_t> blue(20 * 10 * 4, 0);
  for (std::size_t i = 0; i < blue.size(); i += 4) blue[i + 2] = blue[i + 3] = 255;
  const image g = decoded(webp_animated(64, 48, 20, 10, blue, 4, 6));
  CHECK(g.width == 64);
  CHECK(g.height == 48);
  CHECK(px(g, 4, 6) == std::array<int, 3>{0, 0, 255});
  CHECK(px(g, 23, 15) == std::array<int, 3>{0, 0, 255});
  CHECK(px(g, 3, 6) == std::array<int, 3>{255, 255, 255});
  CHECK(px(g, 24, 15) == std::array<int, 3>{255, 255, 255});
}

TEST_CASE("GIF frame 1 decodes through its palette, interlaced or not, transparency to white") {
  const std::vector<std::array<std::uint8_t, 3>> pal = {{0, 0, 0}, {255, 0, 0}, {0, 255, 0}, {10, 20, 30}};
  gif_frame f;
  f.w = 13;
  f.h = 11;
  for (std::uint32_t i = 0; i < f.w * f.h; ++i) f.indices.push_back(static_cast<std::uint8_t>((i * 7 + i / 13) % 4));
  for (bool interlace : {false, true}) {
    f.interlace = interlace;
    f.transparent = -1;
    const image g = decoded(gif(13, 11, pal, {f}));
    for (std::uint32_t y = 0; y < 11; ++y)
      for (std::uint32_t x = 0; x < 13; ++x) {
        const auto& c = pal[f.indices[y * 13 + x]];
        CHECK(px(g, x, y) == std::array<int, 3>{c[0], c[1], c[2]});
      }
  }
  // Transparent index 0 and a frame smaller than the screen, then a second frame that must not show.
  f.interlace = false;
  f.transparent = 0;
  f.left = 2;
  f.top = 3;
  gif_frame second{0, 0, 20, 20, std::vector<std::uint8_t>(400, 3), -1};
  const image g = decoded(gif(20, 20, pal, {f, second}));
  CHECK(g.width == 20);
  CHECK(px(g, 0, 0) == std::array<int, 3>{255, 255, 255});  // outside frame 1
  for (std::uint32_t y = 0; y < 11; ++y)
    for (std::uint32_t x = 0; x < 13; ++x) {
      const int idx = f.indices[y * 13 + x];
      const auto& c = pal[idx];
      const std::array<int, 3> want = idx == 0 ? std::array<int, 3>{255, 255, 255} : std::array<int, 3>{c[0], c[1], c[2]};
      CHECK(px(g, x + 2, y + 3) == want);
    }
}

TEST_CASE("encoders refuse pixels that do not match the size") {
  image bad = make_image(4, 4);
  bad.pixels.pop_back();
  CHECK(encode_png(bad).code() == loom::errc::invalid_argument);
  CHECK(encode_jpeg(bad, 80).code() == loom::errc::invalid_argument);
  CHECK(encode_png(image{}).code() == loom::errc::invalid_argument);
}
