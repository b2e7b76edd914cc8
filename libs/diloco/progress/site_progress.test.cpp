// site_progress: every field crosses the poll's loom.v1.SiteProgress and comes
// back as it was (a field the mapping forgot would come back zero).
#include "libs/diloco/progress/site_progress.hpp"

#include "loom/v1/jobs.pb.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

TEST_CASE("a site's progress survives its wire form field for field") {
  loom::diloco::site_progress p;
  p.site = "site-2";
  p.node = "trainer-5";
  p.step = 7;
  p.loss = 2.5;
  p.bytes_sent = 11;
  p.bytes_received = 13;
  p.stall_s = 0.25;
  p.round = 17;
  p.deltas_sent = 19;
  p.deltas_deferred = 23;
  p.deltas_late = 29;
  p.deltas_dropped = 31;
  p.up_bytes_per_s = 3.5e6;
  loom::v1::SiteProgress wire;
  loom::diloco::to_proto(p, &wire);
  loom::v1::SiteProgress again;
  REQUIRE(again.ParseFromString(wire.SerializeAsString()));
  const auto back = loom::diloco::from_proto(again);
  CHECK(back.site == p.site);
  CHECK(back.node == p.node);
  CHECK(back.step == p.step);
  CHECK(back.loss == p.loss);
  CHECK(back.bytes_sent == p.bytes_sent);
  CHECK(back.bytes_received == p.bytes_received);
  CHECK(back.stall_s == p.stall_s);
  CHECK(back.round == p.round);
  CHECK(back.deltas_sent == p.deltas_sent);
  CHECK(back.deltas_deferred == p.deltas_deferred);
  CHECK(back.deltas_late == p.deltas_late);
  CHECK(back.deltas_dropped == p.deltas_dropped);
  CHECK(back.up_bytes_per_s == p.up_bytes_per_s);
}

TEST_CASE("a site's loss curve: one point per new step, thinned evenly at its limit, written out but never read from a poll") {
  using loom::diloco::curve_limit;
  std::vector<std::pair<std::uint64_t, double>> curve;
  loom::diloco::site_progress p;
  for (std::uint64_t s = 1; s <= 3 * curve_limit; ++s) {
    p.step = s;
    p.loss = 10.0 / double(s);
    loom::diloco::add_curve_point(curve, p);
    loom::diloco::add_curve_point(curve, p);  // the same step polled again adds nothing
  }
  REQUIRE(curve.size() < curve_limit);
  CHECK(curve.size() > curve_limit / 2);
  CHECK(curve.front().first == 1);
  CHECK(curve.back().first == 3 * curve_limit);  // the newest always kept
  CHECK(curve.back().second == 10.0 / double(3 * curve_limit));
  for (std::size_t i = 1; i < curve.size(); ++i) CHECK(curve[i].first > curve[i - 1].first);
  // Evenly spread: no gap more than twice another (away from the newest point).
  std::uint64_t lo = UINT64_MAX, hi = 0;
  for (std::size_t i = 1; i + 1 < curve.size(); ++i) {
    lo = std::min(lo, curve[i].first - curve[i - 1].first);
    hi = std::max(hi, curve[i].first - curve[i - 1].first);
  }
  CHECK(hi <= 2 * lo);
  // A step that goes back (a rollback's replay) is not a new point.
  p.step = 5;
  loom::diloco::add_curve_point(curve, p);
  CHECK(curve.back().first == 3 * curve_limit);

  p.curve = curve;
  loom::v1::SiteProgress wire;
  loom::diloco::to_proto(p, &wire);
  CHECK(static_cast<std::size_t>(wire.curve_steps_size()) == curve.size());
  CHECK(static_cast<std::size_t>(wire.curve_losses_size()) == curve.size());
  CHECK(wire.curve_steps(0) == 1);
  CHECK(loom::diloco::from_proto(wire).curve.empty());
}
