// downlink: the cloud's error feedback on the update it publishes — what a
// lossy codec drops comes in a later round, θ takes back exactly what was not
// sent, the residual survives a save and restore bit for bit, and bad input
// changes nothing.
#include "libs/diloco/downlink.hpp"
#include "libs/diloco/outer_optimizer.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <vector>

using namespace loom;
using namespace loom::diloco;

namespace {

fragment_plan plan() { return fragment_plan::flat(6, 2, 10).value(); }  // [0,3) and [3,6)

std::vector<float> decoded(const std::vector<std::byte>& q, std::size_t n) {
  std::vector<float> v(n);
  REQUIRE(codec::decode(q, v).ok());
  return v;
}

}  // namespace

TEST_CASE("the correction is U minus what was sent, and the residual carries the rest to the next round") {
  downlink d(plan(), codec::codec_id::int8);
  const std::vector<float> u{0.5f, -0.25f, 0.001f};
  std::vector<std::byte> q;
  std::vector<float> corr(3);
  auto used = d.send(1, u, q, corr);
  REQUIRE(used);
  CHECK(*used == codec::codec_id::int8);
  const auto sent = decoded(q, 3);
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(corr[i] == u[i] - sent[i]);
    CHECK(d.residual(1)[i] == doctest::Approx(u[i] - sent[i]).epsilon(1e-6));
  }
  CHECK(std::fabs(corr[2]) > 0);  // int8 of a value 500x below the max is lossy
  // A zero update next round sends what the residual held.
  std::vector<float> zero(3, 0.0f);
  REQUIRE(d.send(1, zero, q, corr));
  const auto second = decoded(q, 3);
  CHECK(second[2] != 0.0f);
  for (float v : d.residual(0)) CHECK(v == 0.0f);  // the other fragment untouched
}

TEST_CASE("with fp32 the update goes exactly and nothing is taken back") {
  downlink d(plan(), codec::codec_id::fp32);
  const std::vector<float> u{0.1f, 0.2f, 0.3f};
  std::vector<std::byte> q;
  std::vector<float> corr(3, 9.0f);
  REQUIRE(d.send(0, u, q, corr));
  CHECK(decoded(q, 3) == u);
  CHECK(corr == std::vector<float>(3, 0.0f));
}

TEST_CASE("θ corrected by the downlink equals the anchor minus what the sites decode, for fp32 exactly") {
  auto opt = outer_optimizer::make(plan(), std::vector<float>(6, 1.0f), outer_options::plain_average()).value();
  downlink d(plan(), codec::codec_id::fp32);
  const std::vector<float> delta{0.25f, 0.5f, 0.125f};
  REQUIRE(opt.accumulate(0, 1.0, delta).ok());
  std::vector<float> u(3), corr(3);
  REQUIRE(opt.step(0, u));
  std::vector<std::byte> q;
  REQUIRE(d.send(0, u, q, corr));
  REQUIRE(opt.correct(0, corr).ok());
  const auto sent = decoded(q, 3);
  for (std::size_t i = 0; i < 3; ++i) CHECK(opt.full_params()[i] == 1.0f - sent[i]);
}

TEST_CASE("the residual restores bit for bit, and the restored downlink sends the same bytes") {
  downlink a(plan(), codec::codec_id::int8);
  std::vector<std::byte> qa, qb;
  std::vector<float> corr(3);
  REQUIRE(a.send(0, std::vector<float>{0.3f, 0.0001f, -0.7f}, qa, corr));
  auto b = downlink::restore(plan(), codec::codec_id::int8, a.residual());
  REQUIRE(b);
  CHECK(b->residual() == a.residual());
  const std::vector<float> next{0.01f, 0.02f, 0.03f};
  REQUIRE(a.send(0, next, qa, corr));
  REQUIRE(b->send(0, next, qb, corr));
  CHECK(qa == qb);
  auto short_one = downlink::restore(plan(), codec::codec_id::int8, std::vector<float>(5, 0.0f));
  CHECK(short_one.code() == errc::corruption);
  CHECK(short_one.err().message.find("5 values, the plan 6") != std::string::npos);
}

TEST_CASE("bad input is refused and changes nothing") {
  downlink d(plan(), codec::codec_id::int8);
  std::vector<std::byte> q;
  std::vector<float> corr(3);
  CHECK(d.send(2, std::vector<float>(3, 0.1f), q, corr).code() == errc::invalid_argument);
  CHECK(d.send(0, std::vector<float>(2, 0.1f), q, corr).code() == errc::invalid_argument);
  auto nan = d.send(0, std::vector<float>{0.1f, std::nanf(""), 0.2f}, q, corr);
  CHECK(nan.code() == errc::invalid_argument);
  CHECK(nan.err().message.find("index 1") != std::string::npos);
  for (float v : d.residual()) CHECK(v == 0.0f);
}

TEST_CASE("a round whose values the codec cannot hold goes exactly in fp32, and later rounds use the codec again") {
  downlink d(plan(), codec::codec_id::fp16);
  std::vector<std::byte> q;
  std::vector<float> corr(3);
  const std::vector<float> huge{1e6f, 0.5f, -2.0f};  // above fp16's 65504
  auto used = d.send(0, huge, q, corr);
  REQUIRE(used);
  CHECK(*used == codec::codec_id::fp32);
  CHECK(decoded(q, 3) == huge);
  CHECK(corr == std::vector<float>(3, 0.0f));
  for (float v : d.residual(0)) CHECK(v == 0.0f);
  auto next = d.send(0, std::vector<float>{0.5f, 0.25f, 1.0f}, q, corr);
  REQUIRE(next);
  CHECK(*next == codec::codec_id::fp16);
}
