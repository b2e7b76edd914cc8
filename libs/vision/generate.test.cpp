#include "libs/vision/generate.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/reject.hpp"
#include "libs/media/testing.hpp"
#include "libs/vision/damage.hpp"

#include <doctest/doctest.h>

#include <cmath>

namespace lv = loom::vision;
namespace media = loom::media;

namespace {

double luma_std(const media::image& img) {
  double s = 0, s2 = 0;
  const double n = double(img.width) * img.height;
  for (std::size_t i = 0; i < img.pixels.size(); i += 3) {
    const double l = 0.299 * img.pixels[i] + 0.587 * img.pixels[i + 1] + 0.114 * img.pixels[i + 2];
    s += l, s2 += l * l;
  }
  return std::sqrt(std::max(0.0, s2 / n - (s / n) * (s / n)));
}

std::string clean_jpeg() {
  auto j = media::encode_jpeg(media::testing::scene(3, 128, 96), 90);
  REQUIRE(j.ok());
  return *j;
}

}  // namespace

TEST_CASE("the generator gives the same pixels for the same label and seed, other pixels for another seed") {
  for (int l = 0; l < lv::num_labels; ++l) {
    const auto label = static_cast<lv::image_label>(l);
    const auto a = lv::generate_example(label, 99), b = lv::generate_example(label, 99), c = lv::generate_example(label, 100);
    INFO(lv::label_name(label));
    CHECK(a.label == label);
    CHECK(a.img.pixels == b.img.pixels);
    CHECK(a.img.pixels != c.img.pixels);
    CHECK(a.img.width >= 96);
    CHECK(a.img.height <= 176);
  }
}

TEST_CASE("a generated set interleaves the labels and does not depend on the thread count") {
  const auto a = lv::generate_set(5, 4);
  REQUIRE(a.size() == 20);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(static_cast<int>(a[i].label) == int(i % lv::num_labels));
  const auto b = lv::generate_set(5, 4);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].img.pixels == b[i].img.pixels);
}

TEST_CASE("blank images are near-flat and the other classes are not") {
  for (std::uint64_t s = 0; s < 20; ++s) {
    CHECK(luma_std(lv::generate_example(lv::image_label::blank, s).img) < 5.0);
    CHECK(luma_std(lv::generate_example(lv::image_label::mostly_text, s).img) > 10.0);
  }
}

TEST_CASE("a truncated JPEG is refused by media::decode and decodes leniently with a grey tail") {
  const std::string j = clean_jpeg();
  const std::string cut = lv::truncate_jpeg(j, 0.4);
  REQUIRE(cut.size() < j.size());
  auto strict = media::decode(cut);
  REQUIRE_FALSE(strict.ok());
  CHECK(media::reason_of(strict.err()) == media::reject_reason::truncated);
  auto lenient = lv::decode_jpeg_lenient(cut);
  REQUIRE(lenient.ok());
  CHECK(lenient->width == 128);
  const std::uint8_t* last = lenient->row(95);
  for (int i = 0; i < 128 * 3; ++i) CHECK(std::abs(int(last[i]) - 128) <= 2);  // libjpeg pads with mid-grey
}

TEST_CASE("bit flips in the entropy-coded data change many blocks but leave the header readable") {
  const std::string j = clean_jpeg();
  REQUIRE(lv::jpeg_scan_start(j) > 100);
  std::mt19937_64 rng(4);
  const std::string bad = lv::flip_jpeg_bytes(j, 4, rng);
  CHECK(bad.size() == j.size());
  CHECK(bad.substr(0, lv::jpeg_scan_start(j)) == j.substr(0, lv::jpeg_scan_start(j)));
  auto a = lv::decode_jpeg_lenient(bad), b = media::decode(j);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(media::testing::mean_abs_error(*a, *b) > 1.0);
  CHECK(lv::decode_jpeg_lenient("not a jpeg").code() == loom::errc::corruption);
}
