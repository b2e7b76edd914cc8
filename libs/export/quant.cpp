#include "libs/export/quant.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace loom::exporter {

std::uint16_t f32_to_f16(float x) {
  const std::uint32_t b = std::bit_cast<std::uint32_t>(x);
  const std::uint16_t sign = static_cast<std::uint16_t>((b >> 16) & 0x8000u);
  const std::uint32_t exp = (b >> 23) & 0xFFu;
  std::uint32_t man = b & 0x7FFFFFu;
  if (exp == 0xFF) return static_cast<std::uint16_t>(sign | 0x7C00u | (man ? 0x200u : 0u));  // inf, NaN
  const int e = static_cast<int>(exp) - 127 + 15;  // half's biased exponent
  if (e >= 31) return static_cast<std::uint16_t>(sign | 0x7C00u);
  if (e <= 0) {  // subnormal half (or zero): shift the full mantissa down, round to even
    if (e < -10) return sign;
    man |= 0x800000u;
    const int shift = 14 - e;  // 24-bit mantissa -> 10 bits at exponent 1 - 15
    std::uint32_t h = man >> shift;
    const std::uint32_t rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<std::uint16_t>(sign | h);
  }
  std::uint32_t h = (static_cast<std::uint32_t>(e) << 10) | (man >> 13);
  const std::uint32_t rem = man & 0x1FFFu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: still right
  return static_cast<std::uint16_t>(sign | h);
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu, man = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(man), -24);  // exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp - 15 + 127) << 23) | (man << 13));
}

void quantize_q8_0(std::span<const float> x, std::span<std::byte> out) {
  for (std::size_t blk = 0; blk * q8_0_block < x.size(); ++blk) {
    const float* v = x.data() + blk * q8_0_block;
    std::byte* o = out.data() + blk * q8_0_block_bytes;
    float amax = 0.0f;
    for (std::size_t i = 0; i < q8_0_block; ++i) amax = std::max(amax, std::fabs(v[i]));
    // The half nearest amax / 127, or the next one up if that is below it:
    // then |x / d| <= 127 needs no clamping and |x - q d| <= d / 2, even where
    // d is an f16 subnormal (blocks of tiny values).
    std::uint16_t d16 = f32_to_f16(amax / 127.0f);
    if (f16_to_f32(d16) * 127.0f < amax) ++d16;
    const float d = f16_to_f32(d16);
    std::memcpy(o, &d16, 2);  // little-endian host (checked in gguf_write.cpp)
    for (std::size_t i = 0; i < q8_0_block; ++i) {
      const float q = d > 0.0f ? std::nearbyint(v[i] / d) : 0.0f;
      o[2 + i] = static_cast<std::byte>(static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f)));
    }
  }
}

void dequantize_q8_0(std::span<const std::byte> in, std::span<float> out) {
  for (std::size_t blk = 0; blk * q8_0_block_bytes < in.size(); ++blk) {
    const std::byte* b = in.data() + blk * q8_0_block_bytes;
    std::uint16_t d16;
    std::memcpy(&d16, b, 2);
    const float d = f16_to_f32(d16);
    for (std::size_t i = 0; i < q8_0_block; ++i)
      out[blk * q8_0_block + i] = static_cast<float>(static_cast<std::int8_t>(b[2 + i])) * d;
  }
}

}  // namespace loom::exporter
