#include "services/scheduler/sites/link_state.hpp"

#include <doctest/doctest.h>

using loom::scheduler::cloud_link_state;
using std::chrono::milliseconds;

TEST_CASE("a site cut off shows degraded, then down, then what it reports once heard again") {
  const milliseconds hb(1000);
  CHECK(cloud_link_state("up", milliseconds(900), hb) == "up");
  CHECK(cloud_link_state("up", milliseconds(2000), hb) == "up");        // one late heartbeat is noise
  CHECK(cloud_link_state("up", milliseconds(2001), hb) == "degraded");  // 1.5 heartbeats + 0.5 s
  CHECK(cloud_link_state("up", milliseconds(5000), hb) == "degraded");
  CHECK(cloud_link_state("up", milliseconds(5001), hb) == "down");      // 3 heartbeats + 2 s: the roster's death
  CHECK(cloud_link_state("up", milliseconds(100), hb) == "up");         // heard again
}

TEST_CASE("a site's own degraded or down report stands until silence makes it down") {
  const milliseconds hb(1000);
  CHECK(cloud_link_state("degraded", milliseconds(100), hb) == "degraded");
  CHECK(cloud_link_state("down", milliseconds(100), hb) == "down");
  CHECK(cloud_link_state("degraded", milliseconds(6000), hb) == "down");
  CHECK(cloud_link_state("", milliseconds(100), hb) == "unknown");
  CHECK(cloud_link_state("unknown", milliseconds(3000), hb) == "degraded");
}
