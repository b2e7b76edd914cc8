#include "libs/vision/dedup.hpp"

#include "libs/media/codec.hpp"
#include "libs/media/normalise.hpp"
#include "libs/media/testing.hpp"
#include "libs/vision/trained.test.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <utility>
#include <vector>

namespace lv = loom::vision;
namespace media = loom::media;

TEST_CASE("the embedding index finds resized and re-encoded copies and keeps distinct images") {
  const auto& model = lv::testing::trained_model();
  constexpr int originals = 100;
  lv::embedding_index index;
  int kept = 0, found = 0, copies = 0;
  float min_copy = 1, max_distinct = -1;
  for (int i = 0; i < originals; ++i) {
    // Scenes the model never saw (seeds far from the generator's), 160x120.
    const media::image img = media::testing::scene(700000 + i, 160, 120);
    const auto v = index.add(lv::embed(model, img));
    kept += !v.duplicate;
    max_distinct = std::max(max_distinct, v.cosine);
    const media::image small = media::resize_area(img, 100 + i % 20, 75 + i % 15);
    const media::image jpeg = *media::decode(*media::encode_jpeg(img, 60));
    const media::image both = *media::decode(*media::encode_jpeg(small, 70));
    for (const media::image* c : {&small, &jpeg, &both}) {
      const auto e = lv::embed(model, *c);
      const auto cv = index.add(e);
      ++copies;
      found += cv.duplicate && cv.of == v.of;
      float self = 0;
      const auto orig = lv::embed(model, img);
      for (std::size_t d = 0; d < e.size(); ++d) self += e[d] * orig[d];
      min_copy = std::min(min_copy, self);
    }
  }
  std::printf("dedup: %d/%d distinct kept, %d/%d copies found; lowest copy cosine %.3f, highest distinct %.3f\n",
              kept, originals, found, copies, min_copy, max_distinct);
  CHECK(double(found) / copies >= 0.95);
  CHECK(double(kept) / originals >= 0.99);
}

TEST_CASE("embeddings are L2-normalised") {
  const auto e = lv::embed(lv::testing::trained_model(), media::testing::scene(1, 90, 90));
  CHECK(int(e.size()) == lv::embedding_dim(lv::testing::trained_model().net));
  double n = 0;
  for (float v : e) n += double(v) * v;
  CHECK(n == doctest::Approx(1.0).epsilon(1e-5));
}

TEST_CASE("the index keeps the first of two identical embeddings and flags the second") {
  lv::embedding_index index(0.9f);
  const std::vector<float> a{1, 0, 0}, b{0, 1, 0}, c{0.99f, 0.141f, 0};
  CHECK_FALSE(index.add(a).duplicate);
  CHECK_FALSE(index.add(b).duplicate);
  const auto v = index.add(c);
  CHECK(v.duplicate);
  CHECK(v.of == 0);
  CHECK(index.kept() == 2);
}

TEST_CASE("the mirror-invariant embedding finds mirrored copies, which pHash cannot, and keeps distinct scenes apart") {
  const auto& model = lv::testing::trained_model();
  auto mirror = [](media::image m) {
    for (std::uint32_t y = 0; y < m.height; ++y)
      for (std::uint32_t x = 0; x < m.width / 2; ++x)
        for (int c = 0; c < 3; ++c)
          std::swap(m.pixels[y * m.stride() + x * 3 + c], m.pixels[y * m.stride() + (m.width - 1 - x) * 3 + c]);
    return m;
  };
  auto dot = [](const std::vector<float>& a, const std::vector<float>& b) {
    float s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
  };
  float min_mirror = 1, max_distinct = -1, plain_mirror = 1;
  std::vector<std::vector<float>> kept;
  for (int i = 0; i < 60; ++i) {
    const media::image img = media::testing::scene(710000 + i, 160, 120);
    const media::image flipped = mirror(img);
    const auto e = lv::embed_mirror_invariant(model, img);
    min_mirror = std::min(min_mirror, dot(e, lv::embed_mirror_invariant(model, flipped)));
    plain_mirror = std::min(plain_mirror, dot(lv::embed(model, img), lv::embed(model, flipped)));
    for (const auto& k : kept) max_distinct = std::max(max_distinct, dot(e, k));
    kept.push_back(e);
  }
  std::printf("mirror-invariant embedding: lowest mirror cosine %.3f (plain embedding %.3f), highest distinct %.3f\n",
              min_mirror, plain_mirror, max_distinct);
  CHECK(min_mirror >= 0.98f);   // the import's semantic threshold (media_policy::semantic_threshold)
  CHECK(max_distinct < 0.98f);
  CHECK(plain_mirror < 0.98f);  // why the import does not use embed() for this
}
