// Blockwise codecs: one scale per block of B elements, then per-element codes.
//
// int8: scale s = absmax / 127^2 (fp32); code q in -127..127; value = s * q * |q|.
//   The square-law ("sqrt companding") grid is finer near zero, where most of a
//   block's values lie: relative L2 error 0.67% on Gaussian data and 0.8% on
//   Student-t(3), against 0.64% / 1.3% for a uniform grid (README.md).
// int4: signed scale d = -(value of largest magnitude), as bf16; code c in
//   0..15; value = d * level[c], level[c] = sign(c-8) * (|c-8| / 8)^1.5. The
//   largest value lands exactly on level[0] = -1, so its side gets 8 steps;
//   the 1.5 power law spends them where the values are (9.2% on Gaussian, 11%
//   on Student-t(3), against 10.7% / 18% for a symmetric uniform grid). bf16,
//   not fp16, because deltas of 1e-6 would fall into fp16's subnormals.
// Layout: all scales, then all codes; int4 packs two codes per byte, element
// 2j in the low nibble; B is even so every block starts on a byte.
#include "libs/codec/half.hpp"
#include "libs/codec/kernels.hpp"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <utility>

namespace loom::codec::detail {
namespace {

// ---- int8 -------------------------------------------------------------------

// Decoding multiplies s by at most 128^2 (q = -128 is decodable, though never
// written): a larger scale would overflow to Inf.
constexpr float int8_max_scale = FLT_MAX / 16384.0f;

// Quantises one block; returns the scale, or a negative value when the block's
// absmax is too large for int8_max_scale.
float int8_block(const float* __restrict x, std::size_t len, std::uint8_t* __restrict q) {
  // absmax on the bit patterns: for |x| the integer order is the float order,
  // and an integer max reduction vectorises without -ffast-math.
  std::uint32_t amb = 0;
  for (std::size_t i = 0; i < len; ++i) {
    const std::uint32_t b = std::bit_cast<std::uint32_t>(x[i]) & 0x7fffffffu;
    amb = b > amb ? b : amb;
  }
  const float am = std::bit_cast<float>(amb);
  if (!(am >= FLT_MIN)) {  // all zero (or tiny): error feedback keeps the rest
    std::memset(q, 0, len);
    return 0.0f;
  }
  const float s = am / 16129.0f;
  if (!(s <= int8_max_scale)) return -1.0f;
  const float inv = 1.0f / am;  // finite: am >= FLT_MIN (16129 / am might not be)
  for (std::size_t i = 0; i < len; ++i) {
    // Nearest level on the linear scale: q+1 beats q when |x|/s > q^2 + q + 1/2,
    // i.e. when q + 1/2 < sqrt(|x|/s - 1/4).
    const float y = std::fabs(x[i]) * inv * 16129.0f - 0.25f;
    float r = std::sqrt(y > 0.0f ? y : 0.0f);
    r = r < 127.0f ? r : 127.0f;
    r = (r + 12582912.0f) - 12582912.0f;  // round to nearest even (1.5 * 2^23)
    const int qi = static_cast<int>(r);
    q[i] = static_cast<std::uint8_t>(x[i] < 0.0f ? -qi : qi);
  }
  return s;
}

// ---- int4 -------------------------------------------------------------------

struct int4_tables {
  std::array<float, 16> level;
  std::array<float, 15> mid;  // decision thresholds between neighbouring levels
};

const int4_tables& int4() {
  static const int4_tables t = [] {
    int4_tables r{};
    for (int c = 0; c < 16; ++c) {
      const float a = static_cast<float>(c < 8 ? 8 - c : c - 8) / 8.0f;
      const float m = a * std::sqrt(a);
      r.level[static_cast<std::size_t>(c)] = c < 8 ? -m : m;
    }
    for (std::size_t j = 0; j < 15; ++j) r.mid[j] = 0.5f * (r.level[j] + r.level[j + 1]);
    return r;
  }();
  return t;
}

// Code of y = x / d: how many thresholds y exceeds (branch-free, vectorises).
template <std::size_t... J>
inline std::uint32_t int4_code(float y, const float* mid, std::index_sequence<J...>) {
  return ((y > mid[J] ? 1u : 0u) + ...);
}

// A float's bits mapped to an int32 with the same order (negative floats
// reversed), so signed max/min reductions run on integers.
inline std::int32_t order_key(float v) {
  const auto k = std::bit_cast<std::int32_t>(v);
  return k ^ ((k >> 31) & 0x7fffffff);
}
inline float from_order_key(std::int32_t k) { return std::bit_cast<float>(k ^ ((k >> 31) & 0x7fffffff)); }

// Quantises one block into len/2 (rounded up) bytes; returns the bf16 scale,
// or nullopt when it overflows bf16.
std::optional<std::uint16_t> int4_block(const float* __restrict x, std::size_t len, std::uint8_t* __restrict out) {
  std::int32_t kmax = INT32_MIN, kmin = INT32_MAX;
  for (std::size_t i = 0; i < len; ++i) {
    const std::int32_t k = order_key(x[i]);
    kmax = k > kmax ? k : kmax;
    kmin = k < kmin ? k : kmin;
  }
  const float vmax = from_order_key(kmax), vmin = from_order_key(kmin);
  const float peak = vmax >= -vmin ? vmax : vmin;
  std::uint16_t db = float_to_bf16(-peak);
  if (!bf16_is_finite(db)) return std::nullopt;
  float d = bf16_to_float(db);
  if (!(std::fabs(d) >= FLT_MIN)) {  // zero (or tiny) block: every code 8
    db = 0;
    d = 0.0f;
  }
  const float inv = d != 0.0f ? 1.0f / d : 0.0f;  // 0 sends every value to code 8 (zero)
  const float* mid = int4().mid.data();
  // Codes first (a plain loop that vectorises), then pairs into bytes; in
  // pieces so the scratch stays on the stack whatever the block size.
  constexpr std::size_t piece = 256;  // even: only the block's last piece can be odd
  std::uint8_t codes[piece + 1];
  for (std::size_t p0 = 0; p0 < len; p0 += piece) {
    const std::size_t cnt = std::min(piece, len - p0);
    for (std::size_t i = 0; i < cnt; ++i)
      codes[i] = static_cast<std::uint8_t>(int4_code(x[p0 + i] * inv, mid, std::make_index_sequence<15>{}));
    codes[cnt] = 0;  // the padding nibble of an odd tail
    const std::size_t bytes = (cnt + 1) / 2;
    for (std::size_t j = 0; j < bytes; ++j)
      out[p0 / 2 + j] = static_cast<std::uint8_t>(codes[2 * j] | (codes[2 * j + 1] << 4));
  }
  return db;
}

}  // namespace

// ---- int8 entry points ------------------------------------------------------

status encode_int8(const header& h, const float* x, std::byte* data) {
  const std::size_t n = h.n, bs = h.block, nb = ceil_div(n, bs);
  auto* codes = reinterpret_cast<std::uint8_t*>(data + 4 * nb);
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t base = b * bs, len = std::min(bs, n - base);
    const float s = int8_block(x + base, len, codes + base);
    if (s < 0.0f)
      return make_error(errc::invalid_argument, "delta values near index " + std::to_string(base) +
                                                    " are too large for int8 (|x| above 3.3e38)");
    store_f32(data + 4 * b, s);
  }
  return ok_status();
}

status check_int8(const header& h, const std::byte* data) {
  const std::size_t nb = ceil_div(h.n, h.block);
  for (std::size_t b = 0; b < nb; ++b) {
    const float s = load_f32(data + 4 * b);
    if (!(s >= 0.0f && s <= int8_max_scale) || std::signbit(s))
      return corrupt("int8 scale of block " + std::to_string(b) + " is " + describe(s) +
                     " (must be finite, >= 0 and <= FLT_MAX/16384)" + at_offset(header_bytes + 4 * b));
  }
  return ok_status();
}

void apply_int8(const header& h, const std::byte* data, float* out, float weight, bool add) {
  const std::size_t n = h.n, bs = h.block, nb = ceil_div(n, bs);
  const auto* codes = reinterpret_cast<const std::int8_t*>(data + 4 * nb);
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t base = b * bs, len = std::min(bs, n - base);
    const float s = load_f32(data + 4 * b);
    const std::int8_t* __restrict q = codes + base;
    float* __restrict o = out + base;
    if (add) {
      const float ws = weight * s;
      for (std::size_t i = 0; i < len; ++i) {
        const float f = static_cast<float>(q[i]);
        o[i] += f * std::fabs(f) * ws;
      }
    } else {
      for (std::size_t i = 0; i < len; ++i) {
        const float f = static_cast<float>(q[i]);
        o[i] = f * std::fabs(f) * s;
      }
    }
  }
}

// ---- int4 entry points ------------------------------------------------------

status encode_int4(const header& h, const float* x, std::byte* data) {
  const std::size_t n = h.n, bs = h.block, nb = ceil_div(n, bs);
  auto* codes = reinterpret_cast<std::uint8_t*>(data + 2 * nb);
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t base = b * bs, len = std::min(bs, n - base);
    const auto db = int4_block(x + base, len, codes + base / 2);
    if (!db)
      return make_error(errc::invalid_argument, "delta values near index " + std::to_string(base) +
                                                    " are too large for int4's bf16 scale (|x| above 3.39e38)");
    store_u16(data + 2 * b, *db);
  }
  return ok_status();
}

status check_int4(const header& h, const std::byte* data) {
  const std::size_t nb = ceil_div(h.n, h.block);
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint16_t db = load_u16(data + 2 * b);
    if (!bf16_is_finite(db))
      return corrupt("int4 scale of block " + std::to_string(b) + " is " + describe(bf16_to_float(db)) +
                     at_offset(header_bytes + 2 * b));
  }
  if (h.n % 2 != 0) {  // the last byte's high nibble is padding
    const std::size_t last = 2 * nb + h.n / 2;
    if ((static_cast<std::uint8_t>(data[last]) >> 4) != 0)
      return corrupt("int4 padding nibble is not zero" + at_offset(header_bytes + last));
  }
  return ok_status();
}

void apply_int4(const header& h, const std::byte* data, float* out, float weight, bool add) {
  const std::size_t n = h.n, bs = h.block, nb = ceil_div(n, bs);
  const auto* codes = reinterpret_cast<const std::uint8_t*>(data + 2 * nb);
  const float* level = int4().level.data();
  for (std::size_t b = 0; b < nb; ++b) {
    const std::size_t base = b * bs, len = std::min(bs, n - base);
    const float d = bf16_to_float(load_u16(data + 2 * b)) * (add ? weight : 1.0f);
    const std::uint8_t* __restrict q = codes + base / 2;
    float* __restrict o = out + base;
    const std::size_t pairs = len / 2;
    if (add) {
      for (std::size_t j = 0; j < pairs; ++j) {
        o[2 * j] += level[q[j] & 15u] * d;
        o[2 * j + 1] += level[q[j] >> 4] * d;
      }
      if (len % 2 != 0) o[len - 1] += level[q[pairs] & 15u] * d;
    } else {
      for (std::size_t j = 0; j < pairs; ++j) {
        o[2 * j] = level[q[j] & 15u] * d;
        o[2 * j + 1] = level[q[j] >> 4] * d;
      }
      if (len % 2 != 0) o[len - 1] = level[q[pairs] & 15u] * d;
    }
  }
}

}  // namespace loom::codec::detail
