// Header, size formula, options and dispatch to the per-format kernels.
#include "libs/codec/codec.hpp"

#include "libs/codec/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom::codec {
namespace {

using detail::corrupt;

constexpr std::uint8_t format_version = 1;
// Larger counts cannot be real (2^56 floats is 288 PB) and keep every size
// formula far from overflowing a u64.
constexpr std::uint64_t max_elements = std::uint64_t{1} << 56;

bool known(codec_id c) {
  const auto v = static_cast<std::uint8_t>(c);
  return v >= 1 && v <= 6;
}

std::uint32_t block_for(codec_id c, const options& o) {
  switch (c) {
    case codec_id::int8: return o.int8_block;
    case codec_id::int4: return o.int4_block;
    case codec_id::topk: return o.topk_chunk;
    default: return 0;
  }
}

void write_header(const header& h, std::byte* p) {
  p[0] = static_cast<std::byte>(h.codec);
  p[1] = static_cast<std::byte>(format_version);
  detail::store_u16(p + 2, static_cast<std::uint16_t>(h.k));
  std::memcpy(p + 4, &h.block, 4);
  std::memcpy(p + 8, &h.n, 8);
}

// Block and k fields against what the codec allows; "" when fine.
std::string bad_fields(codec_id c, std::uint32_t block, std::uint32_t k) {
  const std::string b = std::to_string(block), kk = std::to_string(k);
  switch (c) {
    case codec_id::fp32:
    case codec_id::fp16:
    case codec_id::bf16:
      if (block != 0 || k != 0) return "block size " + b + " and k " + kk + " must be 0 for a dense codec";
      return "";
    case codec_id::int8:
      if (block == 0 || k != 0) return "int8 block size " + b + " (must be >= 1) or k " + kk + " (must be 0)";
      return "";
    case codec_id::int4:
      if (block < 2 || block % 2 != 0 || k != 0)
        return "int4 block size " + b + " (must be even, >= 2) or k " + kk + " (must be 0)";
      return "";
    case codec_id::topk:
      if (block == 0 || block > 4096 || k == 0 || k > block)
        return "topk chunk " + b + " (must be 1..4096) or k " + kk + " (must be 1..chunk)";
      return "";
  }
  return "unknown codec";
}

status decode_impl(std::span<const std::byte> payload, std::span<float> out, float weight, bool add) {
  auto h = inspect(payload);
  if (!h.ok()) return h.err();
  if (h->n != out.size())
    return make_error(errc::invalid_argument, "codec payload holds " + std::to_string(h->n) +
                                                  " values but the buffer has " + std::to_string(out.size()));
  if (add && !std::isfinite(weight))
    return make_error(errc::invalid_argument, "decode_add weight is " + detail::describe(weight));
  const std::byte* data = payload.data() + header_bytes;
  switch (h->codec) {
    case codec_id::fp32:
    case codec_id::fp16:
    case codec_id::bf16: detail::apply_dense(*h, data, out.data(), weight, add); break;
    case codec_id::int8: detail::apply_int8(*h, data, out.data(), weight, add); break;
    case codec_id::int4: detail::apply_int4(*h, data, out.data(), weight, add); break;
    case codec_id::topk: detail::apply_topk(*h, data, out.data(), weight, add); break;
  }
  return ok_status();
}

}  // namespace

namespace detail {

std::uint64_t payload_bytes(codec_id c, std::uint64_t n, std::uint32_t block, std::uint32_t k) {
  switch (c) {
    case codec_id::fp32: return header_bytes + 4 * n;
    case codec_id::fp16:
    case codec_id::bf16: return header_bytes + 2 * n;
    case codec_id::int8: return header_bytes + 4 * ceil_div(n, block) + n;
    case codec_id::int4: return header_bytes + 2 * ceil_div(n, block) + ceil_div(n, 2);
    case codec_id::topk: {
      const std::uint64_t full = n / block, tail = n % block;
      std::uint64_t bytes = header_bytes + full * topk_chunk_bytes(k);
      if (tail != 0) bytes += topk_chunk_bytes(topk_chunk_k(tail, block, k));
      return bytes;
    }
  }
  return 0;
}

std::string describe(float v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(v));
  return buf;
}

std::string at_offset(std::uint64_t off) { return " at offset " + std::to_string(off); }

}  // namespace detail

std::string_view to_string(codec_id c) {
  switch (c) {
    case codec_id::fp32: return "fp32";
    case codec_id::fp16: return "fp16";
    case codec_id::bf16: return "bf16";
    case codec_id::int8: return "int8";
    case codec_id::int4: return "int4";
    case codec_id::topk: return "topk";
  }
  return "unknown";
}

std::optional<codec_id> codec_from_string(std::string_view name) {
  for (codec_id c : all_codecs)
    if (to_string(c) == name) return c;
  return std::nullopt;
}

status check_options(const options& o) {
  if (o.int8_block == 0) return make_error(errc::invalid_argument, "codec options: int8_block must be >= 1");
  if (o.int4_block < 2 || o.int4_block % 2 != 0)
    return make_error(errc::invalid_argument,
                      "codec options: int4_block " + std::to_string(o.int4_block) + " must be even and >= 2");
  if (o.topk_chunk == 0 || o.topk_chunk > 4096)
    return make_error(errc::invalid_argument, "codec options: topk_chunk " + std::to_string(o.topk_chunk) +
                                                  " must be 1..4096 (12-bit in-chunk index)");
  if (!(o.topk_density > 0.0 && o.topk_density <= 1.0))
    return make_error(errc::invalid_argument, "codec options: topk_density must be in (0, 1]");
  return ok_status();
}

std::uint32_t topk_k(const options& o) {
  const double k = std::round(o.topk_density * o.topk_chunk);
  if (k < 1) return 1;
  if (k > o.topk_chunk) return o.topk_chunk;
  return static_cast<std::uint32_t>(k);
}

std::uint64_t encoded_bytes(codec_id c, std::uint64_t n, const options& o) {
  if (!check_options(o).ok() || !known(c) || n > max_elements) return 0;
  return detail::payload_bytes(c, n, block_for(c, o), c == codec_id::topk ? topk_k(o) : 0);
}

std::size_t first_non_finite(std::span<const float> x) {
  // Blocks of 1024 with an OR-reduction the compiler vectorises; the exact
  // index is looked for only in a block that has one.
  const std::size_t n = x.size();
  for (std::size_t i = 0; i < n; i += 1024) {
    const std::size_t e = std::min(n, i + 1024);
    std::uint32_t bad = 0;
    for (std::size_t j = i; j < e; ++j) bad |= (std::bit_cast<std::uint32_t>(x[j]) & 0x7f800000u) == 0x7f800000u;
    if (bad)
      for (std::size_t j = i; j < e; ++j)
        if (!std::isfinite(x[j])) return j;
  }
  return n;
}

status encode_into(codec_id c, std::span<const float> x, const options& o, std::vector<std::byte>& out) {
  // `out` keeps its capacity across calls (no zero-fill of a reused buffer);
  // it is emptied on every error.
  auto fail = [&out](error e) {
    out.clear();
    return status(std::move(e));
  };
  if (auto s = check_options(o); !s.ok()) return fail(s.err());
  if (!known(c))
    return fail(make_error(errc::invalid_argument, "unknown codec id " + std::to_string(static_cast<int>(c))));
  if (x.size() > max_elements)
    return fail(
        make_error(errc::invalid_argument, "codec input of " + std::to_string(x.size()) + " values is too large"));
  if (const std::size_t bad = first_non_finite(x); bad < x.size())
    return fail(make_error(errc::invalid_argument, "delta value at index " + std::to_string(bad) + " is " +
                                                       detail::describe(x[bad]) + ": non-finite deltas are rejected"));
  header h;
  h.codec = c;
  h.block = block_for(c, o);
  h.k = c == codec_id::topk ? topk_k(o) : 0;
  h.n = x.size();
  out.resize(detail::payload_bytes(c, h.n, h.block, h.k));
  write_header(h, out.data());
  std::byte* data = out.data() + header_bytes;
  status s;
  switch (c) {
    case codec_id::fp32:
    case codec_id::fp16:
    case codec_id::bf16: s = detail::encode_dense(h, x.data(), data); break;
    case codec_id::int8: s = detail::encode_int8(h, x.data(), data); break;
    case codec_id::int4: s = detail::encode_int4(h, x.data(), data); break;
    case codec_id::topk: s = detail::encode_topk(h, x.data(), data); break;
  }
  if (!s.ok()) return fail(s.err());
  return s;
}

result<std::vector<std::byte>> encode(codec_id c, std::span<const float> x, const options& o) {
  std::vector<std::byte> out;
  if (auto s = encode_into(c, x, o, out); !s.ok()) return s.err();
  return out;
}

result<header> inspect(std::span<const std::byte> payload) {
  if (payload.size() < header_bytes)
    return corrupt("truncated: " + std::to_string(payload.size()) + " bytes, shorter than the " +
                   std::to_string(header_bytes) + "-byte header");
  const std::byte* p = payload.data();
  const auto id = static_cast<std::uint8_t>(p[0]);
  if (!known(static_cast<codec_id>(id))) return corrupt("unknown codec id " + std::to_string(id) + " at offset 0");
  if (const auto v = static_cast<std::uint8_t>(p[1]); v != format_version)
    return corrupt("unknown format version " + std::to_string(v) + " at offset 1");
  header h;
  h.codec = static_cast<codec_id>(id);
  h.k = detail::load_u16(p + 2);
  std::memcpy(&h.block, p + 4, 4);
  std::memcpy(&h.n, p + 8, 8);
  if (auto why = bad_fields(h.codec, h.block, h.k); !why.empty()) return corrupt(why + " (header offsets 2-7)");
  if (h.n > max_elements) return corrupt("element count " + std::to_string(h.n) + " at offset 8 is too large");
  const std::uint64_t want = detail::payload_bytes(h.codec, h.n, h.block, h.k);
  if (payload.size() != want)
    return corrupt(std::string(payload.size() < want ? "truncated: " : "trailing bytes: ") +
                   std::to_string(payload.size()) + " bytes, but " + std::to_string(h.n) + " values of " +
                   std::string(to_string(h.codec)) + " take " + std::to_string(want));
  const std::byte* data = p + header_bytes;
  status s;
  switch (h.codec) {
    case codec_id::fp32:
    case codec_id::fp16:
    case codec_id::bf16: s = detail::check_dense(h, data); break;
    case codec_id::int8: s = detail::check_int8(h, data); break;
    case codec_id::int4: s = detail::check_int4(h, data); break;
    case codec_id::topk: s = detail::check_topk(h, data); break;
  }
  if (!s.ok()) return s.err();
  return h;
}

status decode(std::span<const std::byte> payload, std::span<float> out) {
  return decode_impl(payload, out, 1.0f, false);
}

status decode_add(std::span<const std::byte> payload, std::span<float> acc, float weight) {
  return decode_impl(payload, acc, weight, true);
}

}  // namespace loom::codec
