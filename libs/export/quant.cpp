#include "libs/export/quant.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace loom::exporter {

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
