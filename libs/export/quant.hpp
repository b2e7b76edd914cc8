// The element encodings a GGUF export uses, as ggml defines them: IEEE
// half precision (f16) and q8_0 (blocks of 32 values: an f16 scale d, then 32
// int8 q; value = q * d). Pure functions on caller-owned memory; any thread.
#pragma once

#include "libs/codec/half.hpp"

#include <cstddef>
#include <cstdint>
#include <span>

namespace loom::exporter {

inline constexpr std::size_t q8_0_block = 32;              // values per block (ggml's QK8_0)
inline constexpr std::size_t q8_0_block_bytes = 2 + 32;    // f16 scale + 32 int8

// libs/codec's conversions: round to nearest, ties to even; overflow gives
// ±inf, NaN stays NaN. f16 -> f32 is exact.
inline std::uint16_t f32_to_f16(float x) { return codec::float_to_half(x); }
inline float f16_to_f32(std::uint16_t h) { return codec::half_to_float(h); }

// Quantises `x` (REQUIRES: size a multiple of 32, every value finite and
// max|x|/127 of each block within f16's range) into `out` (REQUIRES:
// size == x.size() / 32 * 34). The scale d is max|x| / 127 as a half, rounded
// to nearest unless that is below it (then up), and q = round(x / d), so
// |q| <= 127 and |x - q * d| <= d / 2 for every value. (ggml rounds q with
// the unrounded scale and clamps, which can miss that bound by ~6%, and by
// far more where the scale is an f16 subnormal.)
void quantize_q8_0(std::span<const float> x, std::span<std::byte> out);
// The inverse, out[i] = q * d. REQUIRES: out.size() == in.size() / 34 * 32.
void dequantize_q8_0(std::span<const std::byte> in, std::span<float> out);

}  // namespace loom::exporter
