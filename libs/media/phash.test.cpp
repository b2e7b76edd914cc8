#include "libs/media/phash.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/fixtures.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <sstream>
#include <chrono>
#include <random>

using namespace loom::media;
using namespace loom::media::testing;

TEST_CASE("hamming counts differing bits") {
  CHECK(hamming(0, 0) == 0);
  CHECK(hamming(0, ~std::uint64_t{0}) == 64);
  CHECK(hamming(0b1011, 0b0110) == 3);
}

TEST_CASE("pHash is stable for identical pixels and half the bits are set") {
  const image img = scene(40, 128, 96);
  const auto h = phash(img);
  CHECK(phash(img) == h);
  CHECK(phash(*decode(*encode_png(img))) == h);
  // The median split sets 32 bits unless coefficients tie at the median.
  CHECK(std::popcount(h) == 32);
  CHECK(hamming(h, phash(scene(41, 128, 96))) > phash_threshold);
  // Tiny images are resampled up and still hash.
  (void)phash(make_image(1, 1, 7, 8, 9));
  (void)phash(scene(42, 5, 3));
}

TEST_CASE("the pixel digest matches for identical pixels from different files only") {
  const image img = scene(43, 50, 40);
  const auto d = pixel_digest(img);
  CHECK(pixel_digest(*decode(*encode_png(img))) == d);
  CHECK(pixel_digest(*decode(webp_lossless(img))) == d);
  image changed = img;
  changed.pixels[777] ^= 1;
  CHECK(pixel_digest(changed) != d);
  image transposed = img;
  std::swap(transposed.width, transposed.height);
  CHECK(pixel_digest(transposed) != d);
}

// 200 distinct generated images, each with 3 near-duplicates: downscaled to
// 50-70 %, re-encoded as JPEG q=60, 3-5 % cut off each border. Recall: the
// share of (original, variant) pairs within the threshold. Precision:
// TP / (TP + FP) with FP the pairs of distinct originals within it; the
// false-match rate is FP over all distinct pairs.
TEST_CASE("pHash finds near duplicates with recall >= 0.95 and precision >= 0.99") {
  const auto t0 = std::chrono::steady_clock::now();
  constexpr int n = 200;
  constexpr std::uint32_t side = 128;
  std::mt19937_64 rng(0x9a54);
  std::vector<std::uint64_t> originals;
  int matched = 0, variants = 0, worst = 0;
  std::array<int, 3> missed{};
  std::array<double, 3> mean{};
  std::array<int, 65> crop_hist{}, distinct_hist{};
  for (int i = 0; i < n; ++i) {
    const image img = scene(1000 + static_cast<std::uint64_t>(i), side, side);
    const auto h = phash(img);
    originals.push_back(h);
    const double f = 0.5 + 0.2 * unit(rng);
    const auto small = resize_area(img, static_cast<std::uint32_t>(side * f), static_cast<std::uint32_t>(side * f));
    const auto jpeg = decode(*encode_jpeg(img, 60));
    REQUIRE(jpeg.ok());
    std::uint32_t cut[4];
    for (auto& c : cut) c = static_cast<std::uint32_t>(side * (0.03 + 0.02 * unit(rng)) + 0.5);
    const auto cropped = crop(img, cut[0], cut[1], side - cut[0] - cut[2], side - cut[1] - cut[3]);
    const image* vs[3] = {&small, &*jpeg, &cropped};
    for (int k = 0; k < 3; ++k) {
      const int d = hamming(h, phash(*vs[k]));
      ++variants;
      mean[k] += d / double(n);
      worst = std::max(worst, d);
      if (k == 2) ++crop_hist[d];
      if (d <= phash_threshold) ++matched;
      else ++missed[k];
    }
  }
  int false_matches = 0, pairs = 0, closest = 64;
  for (int i = 0; i < n; ++i)
    for (int j = i + 1; j < n; ++j) {
      const int d = hamming(originals[i], originals[j]);
      ++pairs;
      closest = std::min(closest, d);
      ++distinct_hist[d];
      false_matches += d <= phash_threshold;
    }
  const double recall = double(matched) / variants;
  const double precision = double(matched) / (matched + false_matches);
  const double false_rate = double(false_matches) / pairs;
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("pHash threshold " << phash_threshold << ": recall " << recall << " (" << matched << "/" << variants
                             << "; missed downscale " << missed[0] << ", jpeg " << missed[1] << ", crop " << missed[2]
                             << "), precision " << precision << " (" << false_matches << " false matches in " << pairs
                             << " distinct pairs, rate " << false_rate << ")");
  MESSAGE("mean distance downscale " << mean[0] << ", jpeg q60 " << mean[1] << ", crop " << mean[2] << "; worst variant "
                                     << worst << "; closest distinct pair " << closest << "; " << secs << " s");
  std::ostringstream hist;  // only even distances occur: every hash has exactly 32 bits set
  for (int d = 0; d <= 24; d += 2) hist << ' ' << d << ':' << crop_hist[d] << '/' << distinct_hist[d];
  MESSAGE("distance: crop variants / distinct pairs:" << hist.str());
  CHECK(recall >= 0.95);
  CHECK(precision >= 0.99);
  CHECK(false_rate <= 0.01);
}
