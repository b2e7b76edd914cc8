// Dense codecs: fp32 (identity), fp16 and bf16 (one 16-bit value per element,
// little-endian, round-to-nearest-even). Data = n values, nothing else.
#include "libs/codec/half.hpp"
#include "libs/codec/kernels.hpp"

#include <cmath>

namespace loom::codec::detail {
namespace {

// Converts x into 16-bit values; true when none became Inf (x is finite, so an
// Inf is an overflow). One fused pass the compiler vectorises.
template <std::uint16_t (*To)(float), std::uint16_t ExpMask>
bool narrow(const float* __restrict x, std::size_t n, std::byte* __restrict out) {
  std::uint32_t over = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint16_t h = To(x[i]);
    over |= (h & ExpMask) == ExpMask;
    store_u16(out + 2 * i, h);
  }
  return over == 0;
}

template <float (*From)(std::uint16_t)>
void widen(const std::byte* __restrict in, std::size_t n, float* __restrict out, float w, bool add) {
  if (add)
    for (std::size_t i = 0; i < n; ++i) out[i] += w * From(load_u16(in + 2 * i));
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = From(load_u16(in + 2 * i));
}

error overflow(const float* x, std::size_t n, bool fp16) {
  std::size_t i = 0;
  for (; i < n; ++i) {
    const std::uint16_t h = fp16 ? float_to_half(x[i]) : float_to_bf16(x[i]);
    if (fp16 ? !half_is_finite(h) : !bf16_is_finite(h)) break;
  }
  return make_error(errc::invalid_argument,
                    "delta value " + describe(x[i]) + " at index " + std::to_string(i) + " overflows " +
                        (fp16 ? "fp16 (largest finite 65504); use bf16 or int8" : "bf16"));
}

}  // namespace

status encode_dense(const header& h, const float* x, std::byte* data) {
  switch (h.codec) {
    case codec_id::fp32: std::memcpy(data, x, 4 * h.n); return ok_status();
    case codec_id::fp16:
      if (!narrow<float_to_half, 0x7c00>(x, h.n, data)) return overflow(x, h.n, true);
      return ok_status();
    case codec_id::bf16:
      if (!narrow<float_to_bf16, 0x7f80>(x, h.n, data)) return overflow(x, h.n, false);
      return ok_status();
    default: return make_error(errc::internal, "encode_dense called for a blockwise codec");
  }
}

status check_dense(const header& h, const std::byte* data) {
  const std::size_t n = h.n;
  const std::uint32_t width = h.codec == codec_id::fp32 ? 4 : 2;
  // Reduce first (vectorised), locate only on failure.
  std::uint32_t bad = 0;
  if (width == 4) {
    for (std::size_t i = 0; i < n; ++i)
      bad |= (std::bit_cast<std::uint32_t>(load_f32(data + 4 * i)) & 0x7f800000u) == 0x7f800000u;
  } else {
    const std::uint16_t mask = h.codec == codec_id::fp16 ? 0x7c00 : 0x7f80;
    for (std::size_t i = 0; i < n; ++i) bad |= (load_u16(data + 2 * i) & mask) == mask;
  }
  if (bad == 0) return ok_status();
  for (std::size_t i = 0; i < n; ++i) {
    float v;
    if (width == 4) v = load_f32(data + 4 * i);
    else v = h.codec == codec_id::fp16 ? half_to_float(load_u16(data + 2 * i)) : bf16_to_float(load_u16(data + 2 * i));
    if (!std::isfinite(v))
      return corrupt(std::string(to_string(h.codec)) + " value " + std::to_string(i) + " is " + describe(v) +
                     at_offset(header_bytes + width * i));
  }
  return ok_status();
}

void apply_dense(const header& h, const std::byte* data, float* out, float weight, bool add) {
  const std::size_t n = h.n;
  switch (h.codec) {
    case codec_id::fp32:
      if (!add) {
        std::memcpy(out, data, 4 * n);
      } else {
        for (std::size_t i = 0; i < n; ++i) out[i] += weight * load_f32(data + 4 * i);
      }
      return;
    case codec_id::fp16: widen<half_to_float>(data, n, out, weight, add); return;
    case codec_id::bf16: widen<bf16_to_float>(data, n, out, weight, add); return;
    default: return;
  }
}

}  // namespace loom::codec::detail
