#include "libs/codec/half.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace loom::codec;

namespace {

std::uint32_t bits(float f) { return std::bit_cast<std::uint32_t>(f); }

// Independent reference: the nearest bf16 by comparing both neighbours in
// double, ties to the even one.
std::uint16_t bf16_reference(float x) {
  const std::uint32_t down = bits(x) & 0xffff0000u, up = down + 0x10000u;
  const double dd = std::fabs(static_cast<double>(x) - std::bit_cast<float>(down));
  const double du = std::fabs(static_cast<double>(std::bit_cast<float>(up)) - x);
  if (dd < du) return static_cast<std::uint16_t>(down >> 16);
  if (du < dd) return static_cast<std::uint16_t>(up >> 16);
  return static_cast<std::uint16_t>(((down >> 16) & 1u) ? up >> 16 : down >> 16);
}

}  // namespace

TEST_CASE("every fp16 value converts to float and back unchanged, NaN staying NaN") {
  for (std::uint32_t h = 0; h <= 0xffffu; ++h) {
    const float f = half_to_float(static_cast<std::uint16_t>(h));
    const std::uint16_t back = float_to_half(f);
    if ((h & 0x7c00u) == 0x7c00u && (h & 0x03ffu) != 0) {
      CHECK(std::isnan(f));
      CHECK((back & 0x7c00u) == 0x7c00u);
      CHECK((back & 0x03ffu) != 0);
    } else {
      REQUIRE(back == h);
    }
  }
}

TEST_CASE("fp16 conversion rounds to nearest with ties to even, overflowing to infinity") {
  CHECK(float_to_half(1.0f) == 0x3c00);
  CHECK(float_to_half(1.0f + 0x1p-11f) == 0x3c00);      // tie, 1.0 is even
  CHECK(float_to_half(1.0f + 3 * 0x1p-11f) == 0x3c02);  // tie, 1+2^-9 is even
  CHECK(float_to_half(1.0f + 0x1p-11f + 0x1p-20f) == 0x3c01);
  CHECK(float_to_half(-2.0f) == 0xc000);
  CHECK(float_to_half(65504.0f) == 0x7bff);
  CHECK(float_to_half(65519.99f) == 0x7bff);
  CHECK(float_to_half(65520.0f) == 0x7c00);
  CHECK(float_to_half(1e10f) == 0x7c00);
  CHECK(float_to_half(-1e10f) == 0xfc00);
  CHECK(float_to_half(std::numeric_limits<float>::infinity()) == 0x7c00);
  CHECK(float_to_half(-std::numeric_limits<float>::infinity()) == 0xfc00);
  CHECK(float_to_half(0x1p-14f) == 0x0400);         // smallest normal
  CHECK(float_to_half(0x1p-24f) == 0x0001);         // smallest subnormal
  CHECK(float_to_half(0x1p-25f) == 0x0000);         // tie, 0 is even
  CHECK(float_to_half(0x1.8p-25f) == 0x0001);
  CHECK(float_to_half(0x1.8p-24f) == 0x0002);       // tie between 1 and 2 units
  CHECK(float_to_half(-0.0f) == 0x8000);
  const std::uint16_t nan = float_to_half(std::numeric_limits<float>::quiet_NaN());
  CHECK((nan & 0x7c00) == 0x7c00);
  CHECK((nan & 0x03ff) != 0);
  CHECK(std::isnan(half_to_float(float_to_half(std::numeric_limits<float>::signaling_NaN()))));
}

#ifdef __FLT16_MAX__
TEST_CASE("fp16 conversion matches the compiler's _Float16 on a sweep of float bit patterns") {
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += 997) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (std::isnan(x)) continue;
    const auto want = std::bit_cast<std::uint16_t>(static_cast<_Float16>(x));
    REQUIRE(float_to_half(x) == want);
  }
}
#endif

TEST_CASE("bf16 conversion rounds to nearest with ties to even, keeps NaN and Inf") {
  for (std::uint64_t b = 0; b <= 0xffffffffull; b += 991) {
    const float x = std::bit_cast<float>(static_cast<std::uint32_t>(b));
    if (!std::isfinite(x) || std::fabs(x) > 3.38e38f) continue;
    REQUIRE(float_to_bf16(x) == bf16_reference(x));
  }
  CHECK(float_to_bf16(1.0f) == 0x3f80);
  CHECK(float_to_bf16(std::bit_cast<float>(0x3f808000u)) == 0x3f80);  // tie, even stays
  CHECK(float_to_bf16(std::bit_cast<float>(0x3f818000u)) == 0x3f82);  // tie, rounds up to even
  CHECK(float_to_bf16(std::numeric_limits<float>::max()) == 0x7f80);  // overflow -> Inf
  CHECK(float_to_bf16(-std::numeric_limits<float>::infinity()) == 0xff80);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7fffffffu)))));  // no carry into Inf
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7f800001u)))));  // low payload kept NaN
  CHECK(bf16_to_float(0x3f80) == 1.0f);
  CHECK(bf16_is_finite(0x7f7f));
  CHECK(!bf16_is_finite(0x7f80));
  CHECK(half_is_finite(0x7bff));
  CHECK(!half_is_finite(0xfc00));
}
