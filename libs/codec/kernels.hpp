// Internal to libs/codec: the per-format kernels codec.cpp dispatches to, and
// the byte helpers they share. Each format has three entry points:
//   encode_*: writes the data after the header; x is finite (checked by the caller).
//   check_*:  validates the data after a header whose size already matches the
//             formula (so every read below is in bounds); corruption with offsets.
//   apply_*:  out = decoded (add=false) or out += weight * decoded (add=true);
//             only after check_* passed.
#pragma once

#include "libs/codec/codec.hpp"

#include <bit>
#include <cstring>
#include <string>

namespace loom::codec::detail {

static_assert(std::endian::native == std::endian::little, "payloads are little-endian; add byte swaps here");

inline std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return a / b + (a % b != 0); }

inline void store_u16(std::byte* p, std::uint16_t v) { std::memcpy(p, &v, 2); }
inline void store_f32(std::byte* p, float v) { std::memcpy(p, &v, 4); }
inline std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline float load_f32(const std::byte* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}

// Kept values in a topk chunk of `len` elements when a full chunk of `chunk`
// keeps k: k * len / chunk rounded up, at most len (so >= 1 when len >= 1).
inline std::uint64_t topk_chunk_k(std::uint64_t len, std::uint64_t chunk, std::uint64_t k) {
  const std::uint64_t kc = ceil_div(k * len, chunk);
  return kc < len ? kc : len;
}
// Bytes of one topk chunk keeping kc values: two bf16 levels, 12-bit indices, 2-bit codes.
inline std::uint64_t topk_chunk_bytes(std::uint64_t kc) { return 4 + ceil_div(12 * kc, 8) + ceil_div(2 * kc, 8); }

// The size formula from header fields. REQUIRES: block and k valid for the codec, n <= 2^56.
std::uint64_t payload_bytes(codec_id c, std::uint64_t n, std::uint32_t block, std::uint32_t k);

inline error corrupt(std::string what) { return make_error(errc::corruption, "codec payload: " + std::move(what)); }

// "nan", "inf", "-inf" or the value in %g.
std::string describe(float v);

// " at offset N" for a byte offset into the payload.
std::string at_offset(std::uint64_t off);

status encode_dense(const header& h, const float* x, std::byte* data);
status check_dense(const header& h, const std::byte* data);
void apply_dense(const header& h, const std::byte* data, float* out, float weight, bool add);

status encode_int8(const header& h, const float* x, std::byte* data);
status check_int8(const header& h, const std::byte* data);
void apply_int8(const header& h, const std::byte* data, float* out, float weight, bool add);

status encode_int4(const header& h, const float* x, std::byte* data);
status check_int4(const header& h, const std::byte* data);
void apply_int4(const header& h, const std::byte* data, float* out, float weight, bool add);

status encode_topk(const header& h, const float* x, std::byte* data);
status check_topk(const header& h, const std::byte* data);
void apply_topk(const header& h, const std::byte* data, float* out, float weight, bool add);

}  // namespace loom::codec::detail
