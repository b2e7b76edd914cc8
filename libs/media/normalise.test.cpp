#include "libs/media/normalise.hpp"

#include "libs/media/testing.hpp"

#include <doctest/doctest.h>

using namespace loom::media;
using namespace loom::media::testing;

TEST_CASE("fit keeps the aspect ratio and never upscales") {
  const image wide = scene(50, 1000, 500);
  image n = normalise(wide, {512, fit_mode::fit});
  CHECK(n.width == 512);
  CHECK(n.height == 256);
  CHECK(n.pixels.size() == 512u * 256 * 3);
  const image small = scene(51, 100, 50);
  n = normalise(small, {512, fit_mode::fit});
  CHECK(n.width == 100);
  CHECK(n.pixels == small.pixels);
  n = normalise(scene(52, 300, 1000), {512, fit_mode::fit});
  CHECK(n.width == 154);
  CHECK(n.height == 512);
}

TEST_CASE("center_crop cuts the centred square, then downscales") {
  image img = make_image(30, 10, 0, 0, 0);
  for (std::uint32_t y = 0; y < 10; ++y) img.row(y)[10 * 3] = 200;  // column 10: the square's left edge
  image n = normalise(img, {512, fit_mode::center_crop});
  CHECK(n.width == 10);
  CHECK(n.height == 10);
  CHECK(n.row(4)[0] == 200);
  CHECK(n.row(4)[3] == 0);
  n = normalise(scene(53, 1000, 600), {256, fit_mode::center_crop});
  CHECK(n.width == 256);
  CHECK(n.height == 256);
}

TEST_CASE("area averaging takes the mean of each covered block") {
  // 4x2 -> 2x1: each output pixel is the mean of a 2x2 block.
  image img = make_image(4, 2, 0, 0, 0);
  const std::uint8_t vals[2][4] = {{10, 20, 100, 200}, {30, 40, 0, 100}};
  for (std::uint32_t y = 0; y < 2; ++y)
    for (std::uint32_t x = 0; x < 4; ++x) img.row(y)[x * 3] = vals[y][x];
  const image out = resize_area(img, 2, 1);
  CHECK(out.row(0)[0] == 25);
  CHECK(out.row(0)[3] == 100);
  // 3 -> 2: weights 2/3 + 1/3 and 1/3 + 2/3.
  image three = make_image(3, 1, 0, 0, 0);
  three.row(0)[0] = 0;
  three.row(0)[3] = 90;
  three.row(0)[6] = 180;
  const image two = resize_area(three, 2, 1);
  CHECK(two.row(0)[0] == 30);
  CHECK(two.row(0)[3] == 150);
  // A flat image stays flat at any ratio.
  const image flat = resize_area(make_image(97, 53, 17, 99, 201), 31, 7);
  for (std::size_t i = 0; i < flat.pixels.size(); i += 3) {
    CHECK(flat.pixels[i] == 17);
    CHECK(flat.pixels[i + 1] == 99);
    CHECK(flat.pixels[i + 2] == 201);
  }
}

TEST_CASE("crop copies the rectangle") {
  const image img = scene(54, 20, 10);
  const image c = crop(img, 3, 2, 5, 4);
  CHECK(c.width == 5);
  CHECK(c.height == 4);
  for (std::uint32_t y = 0; y < 4; ++y)
    for (std::uint32_t x = 0; x < 5 * 3; ++x) CHECK(c.row(y)[x] == img.row(y + 2)[9 + x]);
}
