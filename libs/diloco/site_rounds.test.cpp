// site_rounds: a site's delta goes through its uplink's error feedback (what
// the codec dropped comes in the next round), an outer update and the global
// parameters are applied by the merge rule, and a resync past a missed version
// drops the residual while one version on keeps it.
#include "libs/diloco/site_rounds.hpp"

#include <doctest/doctest.h>

#include <vector>

using namespace loom;
using namespace loom::diloco;

namespace {

fragment_plan plan() { return fragment_plan::flat(4, 2, 10).value(); }  // [0,2) and [2,4)

std::vector<float> decoded(const std::vector<std::byte>& q, std::size_t n) {
  std::vector<float> v(n);
  REQUIRE(codec::decode(q, v).ok());
  return v;
}

}  // namespace

TEST_CASE("the delta is the anchor minus local, and with fp32 it travels exactly") {
  auto s = site_rounds::make(plan(), std::vector<float>{1, 2, 3, 4}, {0, 0}, codec::codec_id::fp32).value();
  std::vector<float> local{0.5f, 2.5f, 3, 4};
  std::vector<std::byte> q;
  REQUIRE(s.encode_delta(0, local, q).ok());
  CHECK(decoded(q, 2) == std::vector<float>{0.5f, -0.5f});
  CHECK(s.uplink(0) == codec::codec_id::fp32);
  CHECK(s.state().in_flight(0));
  CHECK(s.encode_delta(2, local, q).code() == errc::invalid_argument);
}

TEST_CASE("a lossy uplink carries what it dropped into the next delta") {
  auto s = site_rounds::make(plan(), std::vector<float>{0, 0, 0, 0}, {0, 0}, codec::codec_id::int8).value();
  std::vector<float> local{-1.0f, -0.0005f, 0, 0};  // Δ = {1, 0.0005}: int8 drops the small one
  std::vector<std::byte> q;
  REQUIRE(s.encode_delta(0, local, q).ok());
  const auto first = decoded(q, 2);
  CHECK(first[1] != 0.0005f);
  // Apply the update the aggregator would send (the delta itself, η = 1), then the same step again.
  REQUIRE(s.apply(0, 1, true, first, local).ok());
  for (std::size_t i = 0; i < 2; ++i) CHECK(local[i] == 0.0f - first[i]);  // keep_progress, no step since
  const std::vector<float> before(local);
  REQUIRE(s.encode_delta(0, local, q).ok());  // Δ = 0: only the residual goes
  const auto second = decoded(q, 2);
  CHECK(second[1] == doctest::Approx(0.0005f - first[1]).epsilon(0.01));
  CHECK(local == before);
}

TEST_CASE("parameters one version on keep the residual, and past a missed version they drop it") {
  auto s = site_rounds::make(plan(), std::vector<float>{0, 0, 0, 0}, {0, 0}, codec::codec_id::int8).value();
  std::vector<float> local{-1.0f, -0.0005f, 0, 0};
  std::vector<std::byte> q;
  REQUIRE(s.encode_delta(0, local, q).ok());
  const std::vector<float> g{0.5f, 0.5f};
  REQUIRE(s.apply(0, 1, false, g, local).ok());  // one on: residual kept
  CHECK(s.version(0) == 1);
  REQUIRE(s.encode_delta(0, local, q).ok());
  const auto kept = decoded(q, 2);
  CHECK(kept[1] != 0.0f);
  REQUIRE(s.apply(0, 5, false, g, local).ok());  // missed versions 2..4: residual dropped
  REQUIRE(s.encode_delta(0, local, q).ok());
  CHECK(decoded(q, 2) == std::vector<float>{0.0f, 0.0f});
  CHECK(s.apply(0, 5, false, g, local).code() == errc::conflict);
  CHECK(s.apply(0, 9, true, g, local).code() == errc::conflict);  // an update must be the next version
}
