// loom::codec — compression of DiLoCo pseudo-gradients (parameter deltas) for
// the wire, both directions (site -> cloud, cloud -> site). A payload is self-
// describing: a 16-byte header (codec, block size, element count) then the
// data; layouts and size formulas are in README.md. Pure functions over caller
// buffers: no state, no threads; safe to call from any thread on distinct data.
//
//   offset size field (little-endian)
//        0    1 codec id (codec_id below)
//        1    1 format version (1)
//        2    2 topk: kept values per full chunk (k); 0 for the other codecs
//        4    4 block size: int8/int4 elements per scale, topk chunk length; 0 for fp32/fp16/bf16
//        8    8 element count n
//       16      data
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace loom::codec {

// Wire numbers: never renumber.
enum class codec_id : std::uint8_t {
  fp32 = 1,  // identity, 4 bytes/param (reference)
  fp16 = 2,  // IEEE binary16, round-to-nearest-even; |x| > 65504 is rejected
  bf16 = 3,  // bfloat16, round-to-nearest-even
  int8 = 4,  // per block of 128: fp32 scale + 8-bit sqrt-companded codes (~8.25 bits/param)
  int4 = 5,  // per block of 64: bf16 signed scale + 4-bit power-law codes (~4.25 bits/param)
  topk = 6,  // per chunk of 4096: top 2% by magnitude, 12-bit index + 2-bit value (~0.29 bits/param)
};

// Every codec, least lossy first.
inline constexpr codec_id all_codecs[] = {codec_id::fp32, codec_id::fp16, codec_id::bf16,
                                          codec_id::int8, codec_id::int4, codec_id::topk};

// "fp32", "fp16", "bf16", "int8", "int4", "topk"; "unknown" otherwise.
std::string_view to_string(codec_id c);
// Inverse of to_string; nullopt for other names.
std::optional<codec_id> codec_from_string(std::string_view name);

// Tuning of the blockwise and sparse codecs. The defaults are the issue's
// formats; other values travel in the header, so a decoder needs no options.
struct options {
  std::uint32_t int8_block = 128;  // >= 1
  std::uint32_t int4_block = 64;   // even, >= 2 (each block starts on a byte)
  std::uint32_t topk_chunk = 4096; // 1 .. 4096 (the in-chunk index has 12 bits)
  double topk_density = 0.02;      // (0, 1]; k = clamp(round(density * chunk), 1, chunk)
};

// invalid_argument naming the bad field.
status check_options(const options& o);

// Values kept per full topk chunk under `o`. REQUIRES: check_options(o).ok().
std::uint32_t topk_k(const options& o);

constexpr std::size_t header_bytes = 16;

struct header {
  codec_id codec = codec_id::fp32;
  std::uint32_t block = 0;  // see the table above
  std::uint32_t k = 0;      // topk only
  std::uint64_t n = 0;
};

// Exact payload size, header included, for n values (formulas in README.md).
// Returns 0 (never a real size) when check_options(o) fails.
std::uint64_t encoded_bytes(codec_id c, std::uint64_t n, const options& o = {});

// Encodes x. invalid_argument for bad options, a non-finite value (naming its
// index: NaN deltas are rejected, not spread), or a value the format cannot
// hold (fp16 beyond 65504, a block scale that would overflow on decode).
// `out` is resized to encoded_bytes(c, x.size(), o) (a reused buffer keeps its
// capacity: no allocation per round); on error it is left empty.
status encode_into(codec_id c, std::span<const float> x, const options& o, std::vector<std::byte>& out);
result<std::vector<std::byte>> encode(codec_id c, std::span<const float> x, const options& o = {});

// Reads and fully checks a payload without decoding it: the header, the size
// against the formula, every scale, topk's indices. corruption naming the
// problem and its byte offset. Never reads outside `payload`.
result<header> inspect(std::span<const std::byte> payload);

// out = decoded payload. invalid_argument when out.size() differs from the
// payload's element count; corruption as in inspect. On error `out` is untouched.
status decode(std::span<const std::byte> payload, std::span<float> out);

// acc += weight * decoded payload, in one pass and without a decoded copy:
// the aggregator's weighted sum and error feedback's e -= decode(q). topk
// touches only its kept indices. Errors as decode; on error `acc` is untouched.
status decode_add(std::span<const std::byte> payload, std::span<float> acc, float weight);

// Index of the first NaN/Inf in x, or x.size() if every value is finite.
std::size_t first_non_finite(std::span<const float> x);

}  // namespace loom::codec
