// site_progress: every field crosses the poll's loom.v1.SiteProgress and comes
// back as it was (a field the mapping forgot would come back zero).
#include "libs/diloco/progress/site_progress.hpp"

#include "loom/v1/jobs.pb.h"

#include <doctest/doctest.h>

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
