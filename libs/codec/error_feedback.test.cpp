#include "libs/codec/error_feedback.hpp"
#include "libs/codec/test_data.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

using namespace loom;
using namespace loom::codec;

namespace {

struct stream_figures {
  double first_max = 0;  // largest residual norm over the first 1000 rounds
  double last_max = 0;   // ... over the last 1000
  double drift = 0;      // ||sum of decoded - sum of true deltas|| / ||sum of true deltas||
  double delta_norm = 0; // norm of one round's delta (expected)
};

// `rounds` rounds of Gaussian deltas (sigma 1e-3, n values) through codec c,
// with or without error feedback.
stream_figures run_stream(codec_id c, std::size_t n, int rounds, bool feedback) {
  error_feedback ef(n, c);
  loom::codec::testing::rng r(1234);
  std::vector<double> sum_true(n, 0.0), sum_sent(n, 0.0);
  std::vector<float> delta(n), decoded(n);
  std::vector<std::byte> q;
  stream_figures f;
  f.delta_norm = 1e-3 * std::sqrt(static_cast<double>(n));
  for (int t = 0; t < rounds; ++t) {
    for (auto& d : delta) d = static_cast<float>(1e-3 * r.gauss());
    const status s = feedback ? ef.encode_into(delta, q) : encode_into(c, delta, {}, q);
    REQUIRE(s.ok());
    REQUIRE(decode(q, decoded).ok());
    for (std::size_t i = 0; i < n; ++i) {
      sum_true[i] += delta[i];
      sum_sent[i] += decoded[i];
    }
    const double norm = ef.residual_norm();
    if (t < 1000) f.first_max = std::max(f.first_max, norm);
    if (t >= rounds - 1000) f.last_max = std::max(f.last_max, norm);
  }
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i) {
    num += (sum_sent[i] - sum_true[i]) * (sum_sent[i] - sum_true[i]);
    den += sum_true[i] * sum_true[i];
  }
  f.drift = std::sqrt(num / den);
  return f;
}

}  // namespace

TEST_CASE("with int4 and error feedback the residual stays bounded over 10,000 rounds and the sum does not drift") {
  const auto f = run_stream(codec_id::int4, 8192, 10'000, true);
  MESSAGE("int4: first_max=" << f.first_max << " last_max=" << f.last_max << " delta=" << f.delta_norm
                             << " drift=" << f.drift);
  CHECK(f.last_max <= 1.25 * f.first_max);
  CHECK(f.last_max <= 0.2 * f.delta_norm);
  CHECK(f.drift < 0.01);
}

TEST_CASE("with topk and error feedback the residual stays bounded over 10,000 rounds and the sum does not drift") {
  const auto f = run_stream(codec_id::topk, 8192, 10'000, true);
  MESSAGE("topk: first_max=" << f.first_max << " last_max=" << f.last_max << " delta=" << f.delta_norm
                             << " drift=" << f.drift);
  CHECK(f.last_max <= 1.25 * f.first_max);
  CHECK(f.last_max <= 4 * f.delta_norm);
  CHECK(f.drift < 0.05);
}

TEST_CASE("without error feedback the same streams drift by what each round drops") {
  const auto f4 = run_stream(codec_id::int4, 8192, 1000, false);
  const auto fk = run_stream(codec_id::topk, 8192, 1000, false);
  MESSAGE("no feedback: int4 drift=" << f4.drift << " topk drift=" << fk.drift);
  CHECK(f4.drift > 0.05);
  CHECK(fk.drift > 0.5);
}

TEST_CASE("a non-finite or mis-sized delta is refused and leaves the residual untouched") {
  error_feedback ef(100, codec_id::int4);
  auto first = loom::codec::testing::gaussian(100, 3);
  REQUIRE(ef.encode(first).ok());
  const std::vector<float> before(ef.residual().begin(), ef.residual().end());
  auto bad = loom::codec::testing::gaussian(100, 4);
  bad[77] = NAN;
  auto q = ef.encode(bad);
  REQUIRE(!q.ok());
  CHECK(q.code() == errc::invalid_argument);
  CHECK(q.err().message.find("index 77") != std::string::npos);
  CHECK(ef.encode(std::vector<float>(99)).code() == errc::invalid_argument);
  CHECK(std::equal(before.begin(), before.end(), ef.residual().begin()));
}

TEST_CASE("the residual is exactly what the payload left out") {
  const auto x = loom::codec::testing::gaussian(1000, 8);
  for (codec_id c : all_codecs) {
    CAPTURE(to_string(c));
    error_feedback ef(1000, c);
    auto q = ef.encode(x);
    REQUIRE(q.ok());
    std::vector<float> y(1000);
    REQUIRE(decode(*q, y).ok());
    for (std::size_t i = 0; i < 1000; ++i) REQUIRE(ef.residual()[i] == x[i] - y[i]);
    if (c == codec_id::fp32) CHECK(ef.residual_norm() == 0.0);
  }
}

TEST_CASE("switching codec keeps the residual, and reset drops it") {
  error_feedback ef(5000, codec_id::topk);
  REQUIRE(ef.encode(loom::codec::testing::gaussian(5000, 9)).ok());
  const double carried = ef.residual_norm();
  CHECK(carried > 0);
  ef.set_codec(codec_id::fp32);
  auto q = ef.encode(std::vector<float>(5000, 0.0f));  // fp32 now sends all that was held back
  REQUIRE(q.ok());
  CHECK(ef.residual_norm() == 0.0);
  std::vector<float> y(5000);
  REQUIRE(decode(*q, y).ok());
  double sent = 0;
  for (float v : y) sent += static_cast<double>(v) * v;
  CHECK(std::sqrt(sent) == doctest::Approx(carried).epsilon(1e-6));
  ef.set_codec(codec_id::int8);
  REQUIRE(ef.encode(loom::codec::testing::gaussian(5000, 10)).ok());
  ef.reset();
  CHECK(ef.residual_norm() == 0.0);
}
