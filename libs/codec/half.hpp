// 16-bit float conversions of one value: IEEE binary16 (fp16) and bfloat16.
// Round-to-nearest-even; NaN stays NaN (quieted), Inf stays Inf, a finite value
// too large for the format becomes Inf, subnormals are exact. Written without
// branches (selects only) so loops over arrays vectorise. Header-only, pure.
#pragma once

#include <bit>
#include <cstdint>

namespace loom::codec {

inline std::uint16_t float_to_half(float x) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t sign = (bits >> 16) & 0x8000u;
  const std::uint32_t f = bits & 0x7fffffffu;
  // Normal results: rebias the exponent (127 -> 15, i.e. subtract 112 << 23),
  // then round on bit 13 (add 0xfff, plus 1 when the kept lsb is odd). A carry
  // out of the mantissa bumps the exponent, up to Inf (0x7c00) at 65520.
  const std::uint32_t normal = (f + 0xc8000fffu + ((f >> 13) & 1u)) >> 13;
  // |x| < 2^-14: adding 0.5f puts the half's subnormal unit (2^-24) at the
  // float's lsb, so the FPU does the round-to-nearest-even for us.
  const std::uint32_t sub = std::bit_cast<std::uint32_t>(std::bit_cast<float>(f) + 0.5f) - 0x3f000000u;
  // |x| >= 65536 (or Inf/NaN): Inf, or a quiet NaN.
  const std::uint32_t big = f > 0x7f800000u ? 0x7e00u : 0x7c00u;
  std::uint32_t o = f < 0x38800000u ? sub : normal;
  o = f >= 0x47800000u ? big : o;
  return static_cast<std::uint16_t>(o | sign);
}

inline float half_to_float(std::uint16_t h) {
  const std::uint32_t sign = (static_cast<std::uint32_t>(h) & 0x8000u) << 16;
  const std::uint32_t em = (static_cast<std::uint32_t>(h) & 0x7fffu) << 13;  // exponent+mantissa in float position
  const std::uint32_t exp = em & 0x0f800000u;
  const std::uint32_t normal = em + 0x38000000u;  // rebias 15 -> 127
  const std::uint32_t infnan = em + 0x70000000u;  // exponent 31 -> 255, payload kept
  // Subnormal or zero: (2^-14 * (1 + m/1024)) - 2^-14 = m * 2^-24, exactly.
  const std::uint32_t sub =
      std::bit_cast<std::uint32_t>(std::bit_cast<float>(em + 0x38800000u) - std::bit_cast<float>(0x38800000u));
  std::uint32_t o = exp == 0 ? sub : normal;
  o = exp == 0x0f800000u ? infnan : o;
  return std::bit_cast<float>(o | sign);
}

inline std::uint16_t float_to_bf16(float x) {
  const std::uint32_t f = std::bit_cast<std::uint32_t>(x);
  const std::uint32_t rounded = (f + 0x7fffu + ((f >> 16) & 1u)) >> 16;  // overflow rounds to Inf
  const std::uint32_t nan = (f >> 16) | 0x0040u;                          // keep it a (quiet) NaN
  return static_cast<std::uint16_t>((f & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

inline float bf16_to_float(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// True for the Inf and NaN encodings of each format.
inline bool half_is_finite(std::uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }
inline bool bf16_is_finite(std::uint16_t h) { return (h & 0x7f80u) != 0x7f80u; }

}  // namespace loom::codec
