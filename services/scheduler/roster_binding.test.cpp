// Who may speak for a node (roster_binding.hpp), as pure rules, and the
// roster keeping each id's binding and drain when it forgets the node.
#include "services/scheduler/roster_binding.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {
template <class R>  // a status or a result<T>
bool says(const R& st, const std::string& text) {
  return !st.ok() && st.err().message.find(text) != std::string::npos;
}
}  // namespace

TEST_CASE("the client key never speaks for a node, and polls come only from trainer keys") {
  CHECK(says(may_send(node_request::register_node, "client", "trainer"), "client key"));
  CHECK(says(may_send(node_request::heartbeat, "client"), "client key"));
  CHECK(says(may_send(node_request::poll, "client"), "client key"));
  CHECK(may_send(node_request::poll, "").code() == errc::permission_denied);  // no CURVE key at all
  CHECK(may_send(node_request::heartbeat, "unenrolled").code() == errc::permission_denied);
  CHECK(may_send(node_request::register_node, "trainer", "trainer").ok());
  CHECK(may_send(node_request::register_node, "site:north:trainer", "trainer").ok());
  CHECK(may_send(node_request::heartbeat, "ingest").ok());
  CHECK(may_send(node_request::poll, "trainer").ok());
  CHECK(may_send(node_request::poll, "site:north:trainer").ok());
  CHECK(says(may_send(node_request::poll, "scheduler"), "only from a trainer's key"));
  CHECK(says(may_send(node_request::poll, "site:north:ingest"), "only from a trainer's key"));
  // A key registers only nodes of its own service.
  CHECK(says(may_send(node_request::register_node, "site:north:ingest", "trainer"),
             "site:north:ingest registers only ingest nodes, not a trainer node"));
  CHECK(says(may_send(node_request::register_node, "scheduler", "trainer"), "registers only scheduler nodes"));
}

TEST_CASE("a node id is bound to the key and zone of its first registration") {
  const time_point t0{};
  auto first = binding_after_registration("trainer@south.h", nullptr, "site:south:trainer", "south", "local", t0);
  REQUIRE(first.ok());
  CHECK(first->peer == "site:south:trainer");
  CHECK(first->zone == "south");
  // The same key again (a restarted trainer): the same binding.
  auto again = binding_after_registration("trainer@south.h", &*first, "site:south:trainer", "south", "local", t0 + 5s);
  REQUIRE(again.ok());
  CHECK(again->bound == t0);
  // Another site's key cannot take it over, in its zone or the node's.
  for (const char* zone : {"north", "south"}) {
    auto taken = binding_after_registration("trainer@south.h", &*first, "site:north:trainer", zone, "local", t0);
    REQUIRE(!taken.ok());
    CHECK(taken.code() == errc::permission_denied);
    CHECK(taken.err().message ==
          "node trainer@south.h is bound to CURVE key site:south:trainer (zone south); this request came with key "
          "site:north:trainer");
  }
  // Nor this deployment's own key.
  CHECK(binding_after_registration("trainer@south.h", &*first, "trainer", "south", "local", t0).code() ==
        errc::permission_denied);
  // Its own site key cannot move it to another zone (the scheduler's zone_binding refuses that too).
  CHECK(says(binding_after_registration("trainer@south.h", &*first, "site:south:trainer", "local", "local", t0),
             "cannot move it to zone local"));
}

TEST_CASE("this deployment's own node follows the deployment into the scheduler's zone, and nowhere else") {
  const time_point t0{};
  node_binding own{"trainer", "local", true, t0};
  auto moved = binding_after_registration("trainer@h", &own, "trainer", "edge-1", "edge-1", t0 + 1s);
  REQUIRE(moved.ok());
  CHECK(moved->zone == "edge-1");
  CHECK(moved->drained);  // the drain goes with it
  CHECK(binding_after_registration("trainer@h", &own, "trainer", "edge-2", "edge-1", t0).code() ==
        errc::permission_denied);
}

TEST_CASE("a node stored before bindings is bound by its next registration, in its stored zone") {
  const time_point t0{};
  node_binding old{"", "south", true, t0};  // migration v10: zone and drain kept, no key yet
  CHECK(may_speak_for("trainer@south.h", &old, "site:north:trainer").ok());  // not bound to a key yet
  auto b = binding_after_registration("trainer@south.h", &old, "site:south:trainer", "south", "local", t0 + 9s);
  REQUIRE(b.ok());
  CHECK(b->peer == "site:south:trainer");
  CHECK(b->bound == t0 + 9s);
  CHECK(b->drained);
  // Its zone was kept: another zone is refused even to the first key.
  CHECK(binding_after_registration("trainer@south.h", &old, "site:north:trainer", "north", "local", t0).code() ==
        errc::permission_denied);
  CHECK(may_speak_for("trainer@south.h", &*b, "site:north:trainer").code() == errc::permission_denied);
}

TEST_CASE("the roster keeps a node's binding and drain after it reaps the node") {
  roster r(1000ms, 3);
  const time_point t0{};
  node n;
  n.id = "trainer@south.h";
  n.service = "trainer";
  n.zone = "south";
  r.bind(n.id, node_binding{"site:south:trainer", "south", false, t0});
  r.register_node(n, t0);
  REQUIRE(r.set_drained(n.id, true));
  CHECK(r.find(n.id)->draining);
  auto gone = r.reap(t0 + 3s + 60s + 1s, 60s);  // a minute of silence past death
  CHECK(gone == std::vector<std::string>{n.id});
  CHECK(r.find(n.id) == nullptr);
  const node_binding* b = r.binding(n.id);
  REQUIRE(b != nullptr);
  CHECK(b->peer == "site:south:trainer");
  CHECK(b->drained);
  CHECK(may_speak_for(n.id, b, "site:north:trainer").code() == errc::permission_denied);
  r.register_node(n, t0 + 2min);  // back again: still drained
  CHECK(r.find(n.id)->draining);
  REQUIRE(r.set_drained(n.id, false));
  CHECK_FALSE(r.find(n.id)->draining);
  CHECK_FALSE(r.set_drained("never-seen", true));
}

TEST_CASE("draining is the admin's or the node's own site's, through its token over its own key") {
  CHECK(may_drain("trainer@h", "local", "admin", "alice", "client").ok());
  CHECK(may_drain("trainer@north.h", "north", "admin", "alice", "client").ok());
  auto op = may_drain("trainer@h", "local", "operator", "tenant-a-op", "client");
  CHECK(op.code() == errc::permission_denied);
  CHECK(says(op, "the admin's, or its own site's"));
  CHECK(may_drain("trainer@north.h", "north", "operator", "site:north", "site:north:client").ok());
  CHECK(may_drain("trainer@north.h", "north", "operator", "site:north", "site:north:trainer").ok());
  CHECK(says(may_drain("trainer@south.h", "south", "operator", "site:north", "site:north:client"),
             "drains only its own nodes"));
  CHECK(says(may_drain("trainer@h", "local", "operator", "site:north", "site:north:client"), "drains only its own nodes"));
  // A site's token over another key (the cloud's client key, another site's) counts for nothing.
  CHECK(says(may_drain("trainer@north.h", "north", "operator", "site:north", "client"), "only over its own CURVE keys"));
  CHECK(says(may_drain("trainer@north.h", "north", "operator", "site:north", "site:south:client"),
             "only over its own CURVE keys"));
  // A site key with a plain operator token is no site's word either.
  CHECK(may_drain("trainer@north.h", "north", "operator", "bob", "site:north:client").code() ==
        errc::permission_denied);
}
