#include "libs/export/quant.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <random>
#include <vector>

using namespace loom::exporter;

TEST_CASE("f32 to f16 rounds to nearest even and saturates to infinity") {
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(-2.0f) == 0xC000);
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65519.0f) == 0x7BFF);  // below the midpoint to 65536
  CHECK(f32_to_f16(65520.0f) == 0x7C00);  // the midpoint rounds to even: infinity
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie, to even
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie, to even (up)
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);             // smallest subnormal
  CHECK(f32_to_f16(std::ldexp(1.0f, -25)) == 0x0000);             // tie with 0, to even
  CHECK(f32_to_f16(3 * std::ldexp(1.0f, -25)) == 0x0002);         // tie, to even
  CHECK(f32_to_f16(std::ldexp(1023.5f, -24)) == 0x0400);          // carries into the smallest normal
  CHECK(f32_to_f16(INFINITY) == 0x7C00);
  CHECK((f32_to_f16(NAN) & 0x7FFF) > 0x7C00);
}

TEST_CASE("every f16 value survives f16 to f32 to f16 bit for bit") {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const auto half = static_cast<std::uint16_t>(h);
    const float f = f16_to_f32(half);
    if (std::isnan(f)) continue;
    REQUIRE(f32_to_f16(f) == half);
  }
  CHECK(f16_to_f32(0x3555) == doctest::Approx(0.333251953125).epsilon(1e-12));
}

TEST_CASE("f32 to f16 picks the nearer of the two neighbouring halves") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-70000.0f, 70000.0f);
  for (int i = 0; i < 100000; ++i) {
    const float x = u(rng) * std::ldexp(1.0f, -static_cast<int>(rng() % 30));
    const std::uint16_t h = f32_to_f16(x);
    const float r = f16_to_f32(h);
    if (std::isinf(r)) {
      REQUIRE(std::fabs(x) >= 65520.0f);
      continue;
    }
    // The neighbours one unit either side are no nearer.
    for (int d : {-1, 1}) {
      const auto other = static_cast<std::uint16_t>(h + d);
      const float o = f16_to_f32(other);
      if (std::isnan(o) || std::isinf(o) || ((other ^ h) & 0x8000)) continue;
      REQUIRE(std::fabs(x - r) <= std::fabs(x - o));
    }
  }
}

TEST_CASE("q8_0 round trips each block within half its scale") {
  std::mt19937 rng(11);
  std::normal_distribution<float> n(0.0f, 1.0f);
  const std::size_t blocks = 400;
  std::vector<float> x(blocks * q8_0_block);
  for (std::size_t b = 0; b < blocks; ++b) {
    const float scale = std::ldexp(1.0f, static_cast<int>(b % 40) - 30);  // 2^-30 .. 2^9
    for (std::size_t i = 0; i < q8_0_block; ++i) x[b * q8_0_block + i] = scale * n(rng);
  }
  for (std::size_t i = 0; i < q8_0_block; ++i) x[i] = 0.0f;                  // an all-zero block
  x[5 * q8_0_block + 3] = 1000.0f;                                            // one outlier
  std::vector<std::byte> q(blocks * q8_0_block_bytes);
  quantize_q8_0(x, q);
  std::vector<float> y(x.size());
  dequantize_q8_0(q, y);
  for (std::size_t b = 0; b < blocks; ++b) {
    std::uint16_t d16;
    std::memcpy(&d16, q.data() + b * q8_0_block_bytes, 2);
    const float d = f16_to_f32(d16);
    float amax = 0, worst = 0;
    for (std::size_t i = 0; i < q8_0_block; ++i) {
      amax = std::max(amax, std::fabs(x[b * q8_0_block + i]));
      worst = std::max(worst, std::fabs(x[b * q8_0_block + i] - y[b * q8_0_block + i]));
    }
    CAPTURE(b);
    CHECK(d * 127.0f >= amax);                                      // no value needs |q| > 127
    CHECK(d <= amax / 127.0f * (1 + 1.0f / 1024) + std::ldexp(1.0f, -24));  // at most one half-step above
    CHECK(worst <= d / 2 * (1 + 1e-6f));
  }
  for (std::size_t i = 0; i < q8_0_block; ++i) CHECK(y[i] == 0.0f);
}
