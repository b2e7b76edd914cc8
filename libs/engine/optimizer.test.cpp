// AdamW against hand-computed steps, the LR schedule's values, and clipping.
#include "libs/engine/optimizer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace loom::engine;

TEST_CASE("AdamW's first step matches the hand-computed update, decay only where asked") {
  // Ranges: [0,2) decayed, [2,4) not. lr 0.1, wd 0.5 -> decay factor 0.95.
  // Step 1: m̂ = g, v̂ = g², so the step is lr·g/(|g| + eps) ≈ ±lr.
  adamw opt(4, adamw_config{0.9f, 0.999f, 1e-8f, 0.5f}, {{0, 2, true}, {2, 2, false}});
  std::vector<float> p{1.0f, -2.0f, 0.5f, 3.0f};
  const std::vector<float> g{0.1f, -0.2f, 0.3f, 0.0f};
  opt.step(p, g, 0.1f);
  CHECK(p[0] == doctest::Approx(0.85).epsilon(1e-6));   // 1·0.95 − 0.1
  CHECK(p[1] == doctest::Approx(-1.8).epsilon(1e-6));   // −2·0.95 + 0.1
  CHECK(p[2] == doctest::Approx(0.4).epsilon(1e-6));    // 0.5 − 0.1, no decay
  CHECK(p[3] == 3.0f);                                  // zero gradient, no decay: unchanged
  CHECK(opt.m()[0] == doctest::Approx(0.01));           // (1 − 0.9)·0.1
  CHECK(opt.v()[1] == doctest::Approx(0.001 * 0.04));   // (1 − 0.999)·0.2²
  CHECK(opt.steps_taken() == 1);
}

TEST_CASE("AdamW's second step uses bias-corrected moments and the gradient scale") {
  adamw opt(1, adamw_config{0.9f, 0.99f, 1e-8f, 0.0f}, {{0, 1, true}});
  std::vector<float> p{0.0f};
  opt.step(p, std::vector<float>{1.0f}, 0.01f);  // p = −0.01
  opt.step(p, std::vector<float>{4.0f}, 0.01f, 0.5f);  // effective g = 2
  // m = 0.9·0.1 + 0.1·2 = 0.29, v = 0.99·0.01 + 0.01·4 = 0.0499
  const double mh = 0.29 / (1 - 0.81), vh = 0.0499 / (1 - 0.9801);
  CHECK(p[0] == doctest::Approx(-0.01 - 0.01 * mh / std::sqrt(vh)).epsilon(1e-5));
}

TEST_CASE("the cosine schedule warms up linearly and decays to the minimum") {
  const lr_schedule s{1.0f, 0.1f, 4, 14};
  CHECK(s.at(0) == doctest::Approx(0.25));
  CHECK(s.at(1) == doctest::Approx(0.5));
  CHECK(s.at(3) == doctest::Approx(1.0));
  CHECK(s.at(4) == doctest::Approx(1.0));   // start of the cosine
  CHECK(s.at(9) == doctest::Approx(0.55));  // half way: (max + min) / 2
  CHECK(s.at(13) == doctest::Approx(0.1 + 0.45 * (1 + std::cos(M_PI * 0.9))));
  CHECK(s.at(14) == doctest::Approx(0.1));
  CHECK(s.at(1000) == doctest::Approx(0.1));
  const lr_schedule no_warmup{2.0f, 0.0f, 0, 10};
  CHECK(no_warmup.at(0) == doctest::Approx(2.0));
  CHECK(no_warmup.at(5) == doctest::Approx(1.0));
}

TEST_CASE("global-norm clipping scales a gradient above the limit down to it, and no other") {
  CHECK(global_norm(std::vector<float>{3.0f, 4.0f}) == doctest::Approx(5.0));
  const std::vector<float> many(1000003, 0.001f);  // not a multiple of the chunk count
  CHECK(global_norm(many) == doctest::Approx(std::sqrt(1000003.0) * double(0.001f)).epsilon(1e-9));
  CHECK(global_norm(std::vector<float>{}) == 0.0);
  CHECK(clip_scale(5.0, 1.0f) == doctest::Approx(0.2));
  CHECK(clip_scale(0.5, 1.0f) == 1.0f);
  CHECK(clip_scale(5.0, 0.0f) == 1.0f);  // clipping off
  // Clipped gradient fed to AdamW through grad_scale: the same as pre-scaled grads.
  adamw a(2, {}, {{0, 2, true}}), b(2, {}, {{0, 2, true}});
  std::vector<float> pa{1.0f, 1.0f}, pb = pa;
  const std::vector<float> g{3.0f, 4.0f};
  a.step(pa, g, 0.1f, clip_scale(5.0, 1.0f));
  b.step(pb, std::vector<float>{g[0] * clip_scale(5.0, 1.0f), g[1] * clip_scale(5.0, 1.0f)}, 0.1f);
  CHECK(pa == pb);
}
