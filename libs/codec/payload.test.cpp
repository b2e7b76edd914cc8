// Bad payloads: each is refused with corruption (or invalid_argument for the
// caller's own buffer) naming the problem and its offset, never read out of
// bounds, never half-applied.
#include "libs/codec/codec.hpp"
#include "libs/codec/test_data.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

using namespace loom;
using namespace loom::codec;
using loom::codec::testing::gaussian;

namespace {

std::vector<std::byte> payload(codec_id c, std::size_t n, std::uint64_t seed = 1) {
  auto q = encode(c, gaussian(n, seed));
  REQUIRE(q.ok());
  return std::move(*q);
}

void put_u16(std::vector<std::byte>& p, std::size_t at, std::uint16_t v) { std::memcpy(p.data() + at, &v, 2); }
void put_u32(std::vector<std::byte>& p, std::size_t at, std::uint32_t v) { std::memcpy(p.data() + at, &v, 4); }
void put_f32(std::vector<std::byte>& p, std::size_t at, float v) { std::memcpy(p.data() + at, &v, 4); }

// inspect fails with corruption and a message containing every fragment.
void refused(const std::vector<std::byte>& p, std::initializer_list<const char*> fragments) {
  auto h = inspect(p);
  REQUIRE(!h.ok());
  CHECK(h.code() == errc::corruption);
  for (const char* f : fragments) CHECK_MESSAGE(h.err().message.find(f) != std::string::npos, h.err().message);
  // decode refuses it too (inspect runs first), and leaves the buffer alone
  std::vector<float> out(10, 7.0f);
  CHECK(!decode(p, out).ok());
  CHECK(!decode_add(p, out, 1.0f).ok());
  for (float v : out) REQUIRE(v == 7.0f);
}

}  // namespace

TEST_CASE("a payload shorter than its header or its formula is truncated, at every length") {
  for (codec_id c : all_codecs) {
    CAPTURE(to_string(c));
    const auto p = payload(c, 4196);
    for (std::size_t len = 0; len < p.size(); len += (len < 64 ? 1 : 97)) {
      auto h = inspect(std::span(p).first(len));
      REQUIRE(!h.ok());
      CHECK(h.code() == errc::corruption);
      CHECK(h.err().message.find("truncated") != std::string::npos);
    }
  }
}

TEST_CASE("a payload with bytes after its data has trailing bytes") {
  auto p = payload(codec_id::int8, 300);
  p.push_back(std::byte{0});
  refused(p, {"trailing bytes", "329 bytes", "take 328"});
}

TEST_CASE("an unknown codec id or format version is refused with its offset") {
  for (std::uint8_t id : {0, 7, 255}) {
    auto p = payload(codec_id::int4, 10);
    p[0] = std::byte{id};
    refused(p, {"unknown codec id", "at offset 0"});
  }
  auto p = payload(codec_id::int4, 10);
  p[1] = std::byte{2};
  refused(p, {"format version 2", "at offset 1"});
}

TEST_CASE("block sizes and k the codec cannot have are refused") {
  auto odd = payload(codec_id::int4, 300);
  put_u32(odd, 4, 63);
  refused(odd, {"int4 block size 63"});
  auto chunk = payload(codec_id::topk, 300);
  put_u32(chunk, 4, 5000);
  refused(chunk, {"topk chunk 5000"});
  auto k0 = payload(codec_id::topk, 300);
  put_u16(k0, 2, 0);
  refused(k0, {"k 0"});
  auto dense = payload(codec_id::fp16, 300);
  put_u32(dense, 4, 8);
  refused(dense, {"must be 0 for a dense codec"});
}

TEST_CASE("an element count that disagrees with the size, or with the caller's buffer, is refused") {
  auto p = payload(codec_id::int8, 300);
  put_u32(p, 8, 301);
  refused(p, {"truncated", "301 values of int8 take 329"});
  put_u32(p, 8, 0);
  put_u32(p, 12, 1u << 28);  // n = 2^60
  refused(p, {"element count", "too large", "at offset 8"});

  const auto good = payload(codec_id::int8, 300);
  std::vector<float> out(301, 7.0f);
  auto s = decode(good, out);
  REQUIRE(!s.ok());
  CHECK(s.code() == errc::invalid_argument);
  CHECK(s.err().message.find("holds 300 values but the buffer has 301") != std::string::npos);
  for (float v : out) CHECK(v == 7.0f);
}

TEST_CASE("a non-finite, negative or overflowing int8 scale is refused with its block and offset") {
  // n = 300, block 128: scales at offsets 16, 20, 24.
  for (float bad : {NAN, INFINITY, -1.0f, 1e36f}) {
    auto p = payload(codec_id::int8, 300);
    put_f32(p, 20, bad);
    refused(p, {"int8 scale of block 1", "at offset 20"});
  }
}

TEST_CASE("a non-finite int4 scale or a set padding nibble is refused") {
  // n = 301, block 64: 5 bf16 scales at 16..26, codes at 26..177.
  for (std::uint16_t bad : {0x7f80, 0xff80, 0x7fc0}) {
    auto p = payload(codec_id::int4, 301);
    put_u16(p, 24, bad);
    refused(p, {"int4 scale of block 4", "at offset 24"});
  }
  auto p = payload(codec_id::int4, 301);
  REQUIRE(p.size() == 177);
  p[176] |= std::byte{0x10};
  refused(p, {"padding nibble", "at offset 176"});
}

TEST_CASE("topk indices out of range or out of order, bad levels and set padding bits are refused") {
  // n = 4196: chunk 0 keeps 82 (148 bytes at 16), chunk 1 has 100 values and keeps 3
  // (levels at 164, indices at 168..173, codes at 173).
  const auto good = payload(codec_id::topk, 4196);
  REQUIRE(good.size() == 174);

  auto range = good;
  range[171] = std::byte{0xff};
  range[172] = std::byte{0x0f};  // third index of chunk 1 = 4095
  refused(range, {"topk chunk 1 index 2 is 4095, out of range (chunk length 100)", "at offset 171"});

  auto order = good;
  order[20] = std::byte{0xff};
  order[21] |= std::byte{0x0f};  // first index of chunk 0 = 4095
  refused(order, {"topk chunk 0 index 1", "not above the previous 4095", "at offset 20"});

  for (std::uint16_t lo : {0x7fc0, 0x7f80, 0x8001, 0x7f00}) {  // NaN, Inf, negative, above hi
    auto levels = good;
    put_u16(levels, 16, lo);
    refused(levels, {"topk chunk 0 levels", "at offset 16"});
  }

  auto ipad = good;
  ipad[172] |= std::byte{0x80};
  refused(ipad, {"topk chunk 1 index padding", "at offset 172"});
  auto cpad = good;
  cpad[173] |= std::byte{0x40};
  refused(cpad, {"topk chunk 1 code padding", "at offset 173"});
}

TEST_CASE("non-finite values inside an fp32, fp16 or bf16 payload are refused with index and offset") {
  auto f32 = payload(codec_id::fp32, 10);
  put_f32(f32, 16 + 4 * 6, NAN);
  refused(f32, {"fp32 value 6 is nan", "at offset 40"});
  auto f16 = payload(codec_id::fp16, 10);
  put_u16(f16, 16 + 2 * 4, 0x7c00);
  refused(f16, {"fp16 value 4 is inf", "at offset 24"});
  auto b16 = payload(codec_id::bf16, 10);
  put_u16(b16, 16 + 2 * 9, 0xffc0);
  refused(b16, {"bf16 value 9 is nan", "at offset 34"});
}

TEST_CASE("randomly damaged payloads are refused or decode to finite values, never half-applied") {
  loom::codec::testing::rng r(99);
  for (codec_id c : all_codecs) {
    CAPTURE(to_string(c));
    const std::size_t n = 1000;
    const auto good = payload(c, n, 5);
    int refused_count = 0;
    for (int it = 0; it < 1500; ++it) {
      auto p = good;
      const int flips = 1 + static_cast<int>(r.next() % 3);
      for (int f = 0; f < flips; ++f) {
        const std::size_t at = static_cast<std::size_t>(r.next() % p.size());
        p[at] ^= static_cast<std::byte>(1u << (r.next() % 8));
      }
      std::vector<float> out(n, 7.0f);
      auto s = decode(p, out);
      if (s.ok()) {
        for (float v : out) REQUIRE(std::isfinite(v));
      } else {
        ++refused_count;
        CHECK((s.code() == errc::corruption || s.code() == errc::invalid_argument));
        for (float v : out) REQUIRE(v == 7.0f);
      }
    }
    MESSAGE(to_string(c) << ": " << refused_count << " of 1500 damaged payloads refused");
    CHECK(refused_count > 0);
  }
}
