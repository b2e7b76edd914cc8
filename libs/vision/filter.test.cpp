#include "libs/vision/filter.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/vision/generate.hpp"
#include "libs/vision/trained.test.hpp"

#include <doctest/doctest.h>

#include <cstdio>

namespace lv = loom::vision;

TEST_CASE("the filter labels held-out generated images with at least 0.95 accuracy") {
  const auto& model = lv::testing::trained_model();
  const auto heldout = lv::generate_set(lv::testing::heldout_seed, 200);
  const lv::confusion c = lv::evaluate(model, heldout);
  std::printf("held-out confusion (%d images, accuracy %.4f):\n%s", c.total(), c.accuracy(), c.to_string().c_str());
  CHECK(c.total() == 1000);
  CHECK(c.accuracy() >= 0.95);
  for (int l = 0; l < lv::num_labels; ++l) {
    INFO("label " << lv::label_names[l]);
    CHECK(c.counts[l][l] >= 180);  // no class is sacrificed for the others: >= 0.90 recall each
  }
}
