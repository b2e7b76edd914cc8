#include "services/scheduler/roster.hpp"

#include <doctest/doctest.h>

using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {
node make(const std::string& id, const std::string& zone = "local") {
  node n;
  n.id = id;
  n.service = "trainer";
  n.zone = zone;
  n.resources.cpu_cores = 2;
  return n;
}
}  // namespace

TEST_CASE("a node that misses three heartbeats is dead, one missed makes it suspect") {
  roster r(1000ms, 3);
  time_point t0{};
  r.register_node(make("t1"), t0);
  const node* n = r.find("t1");
  REQUIRE(n);
  CHECK(r.state(*n, t0 + 900ms) == node_state::alive);
  CHECK(r.state(*n, t0 + 1500ms) == node_state::suspect);
  CHECK(r.state(*n, t0 + 2900ms) == node_state::suspect);
  CHECK(r.state(*n, t0 + 3100ms) == node_state::dead);
  CHECK(r.heartbeat("t1", t0 + 3100ms));
  CHECK(r.state(*r.find("t1"), t0 + 3200ms) == node_state::alive);
}

TEST_CASE("a heartbeat from an unknown node asks it to register again") {
  roster r;
  CHECK_FALSE(r.heartbeat("ghost", time_point{}));
}

TEST_CASE("re-registering replaces the node and bumps the roster version") {
  roster r;
  auto a = make("t1");
  a.pid = 10;
  r.register_node(a, time_point{});
  auto v = r.version();
  a.pid = 11;
  r.register_node(a, time_point{} + 5s);
  CHECK(r.version() == v + 1);
  CHECK(r.find("t1")->pid == 11);
  CHECK(r.list().size() == 1);
}

TEST_CASE("listing filters by zone and reaping removes long-dead nodes only") {
  roster r(1000ms, 3);
  time_point t0{};
  r.register_node(make("a", "edge-1"), t0);
  r.register_node(make("b", "edge-2"), t0);
  r.register_node(make("c", "edge-1"), t0 + 10s);
  CHECK(r.list("edge-1").size() == 2);
  CHECK(r.list().size() == 3);
  auto gone = r.reap(t0 + 10s, 5s);
  CHECK(gone == std::vector<std::string>{"a", "b"});
  CHECK(r.list().size() == 1);
  CHECK(r.set_drained("c", true));
  CHECK(r.find("c")->draining);
  CHECK_FALSE(r.set_drained("zzz", true));
}

TEST_CASE("a node restored by a scheduler taking over is alive through its grace, then as its beats say") {
  roster r(1000ms, 3);
  time_point t0{};
  auto n = make("t1");
  n.last_seen = t0;
  r.restore(n, t0 + 6s);
  const node* got = r.find("t1");
  REQUIRE(got);
  CHECK(r.state(*got, t0 + 5900ms) == node_state::alive);  // silent 5.9 s, inside the grace
  CHECK(r.state(*got, t0 + 6s) == node_state::dead);        // the grace over, 6 s silent
  r.restore(n, t0 + 6s);
  CHECK(r.heartbeat("t1", t0 + 2s));  // heard: its beats say from now on
  CHECK(r.state(*r.find("t1"), t0 + 5500ms) == node_state::dead);
  auto old = make("t2");
  old.last_seen = t0;
  r.restore(old);  // no grace: a node long silent is dead as stored
  CHECK(r.state(*r.find("t2"), t0 + 4s) == node_state::dead);
}
