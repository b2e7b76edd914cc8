#include "libs/codec/choose.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using namespace loom::codec;

// GPT-2 small (124M parameters), the worked example of distributed.md §7.1.
constexpr std::uint64_t gpt2_small = 124'000'000;
constexpr double gbps = 125e6, mbps100 = 12.5e6;  // bytes per second

TEST_CASE("a fast link gets fp16, the least lossy codec that fits") {
  const auto c = choose_codec(gbps, gpt2_small, 2.0);  // fp16: 248 MB in 1.98 s
  CHECK(c.codec == codec_id::fp16);
  CHECK(c.fits);
  CHECK(c.bytes == encoded_bytes(codec_id::fp16, gpt2_small));
  CHECK(c.seconds == doctest::Approx(1.984).epsilon(0.001));
}

TEST_CASE("slower links step down to int8, then int4, then topk") {
  CHECK(choose_codec(mbps100, gpt2_small, 12.0).codec == codec_id::int8);  // 10.2 s
  CHECK(choose_codec(mbps100, gpt2_small, 6.0).codec == codec_id::int4);   // 5.3 s
  const auto k = choose_codec(mbps100, gpt2_small, 1.0);                   // 0.36 s
  CHECK(k.codec == codec_id::topk);
  CHECK(k.fits);
}

TEST_CASE("a budget exactly equal to a payload's transfer time fits") {
  const double bytes = static_cast<double>(encoded_bytes(codec_id::int8, 1000));
  CHECK(choose_codec(bytes, 1000, 1.0).codec == codec_id::int8);
  CHECK(choose_codec(bytes - 1, 1000, 1.0).codec == codec_id::int4);
}

TEST_CASE("a dead or unmeasured link gets topk, flagged as not fitting") {
  for (double bw : {0.0, -5.0, std::numeric_limits<double>::quiet_NaN()}) {
    const auto c = choose_codec(bw, gpt2_small, 10.0);
    CHECK(c.codec == codec_id::topk);
    CHECK(!c.fits);
    CHECK(std::isinf(c.seconds));
  }
  const auto slow = choose_codec(1000.0, gpt2_small, 1.0);
  CHECK(slow.codec == codec_id::topk);
  CHECK(!slow.fits);
  CHECK(slow.seconds > 1.0);
}

TEST_CASE("the default codec without a measurement is int8") { CHECK(default_codec == codec_id::int8); }
