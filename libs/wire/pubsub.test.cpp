#include "libs/wire/pubsub.hpp"
#include "libs/wire/test_util.hpp"

#include <doctest/doctest.h>

#include <chrono>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;

TEST_CASE("an event published over CURVE reaches a registered subscriber of its prefix only") {
  test::curve_fixture f;
  publisher pub(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*", "scheduler");
  subscriber sub(f.ctx, pub.endpoint(), f.server.public_z85, f.alice);
  sub.subscribe("job.");

  // PUB drops until the subscription has propagated: publish until one arrives.
  std::optional<event> got;
  const auto deadline = std::chrono::steady_clock::now() + 5s;
  while (!got && std::chrono::steady_clock::now() < deadline) {
    pub.publish("node.joined", "loom.v1.NodeId", "n1");
    pub.publish("job.started", "loom.v1.JobId", std::string("j\0b", 3));
    if (auto ev = sub.recv(50ms)) got = std::move(*ev);
  }
  REQUIRE(got.has_value());
  CHECK(got->topic == "job.started");
  CHECK(got->type == "loom.v1.JobId");
  CHECK(got->body == std::string("j\0b", 3));
  CHECK(got->source == "scheduler");
  CHECK(got->unix_ns > 0);
  CHECK(sub.malformed() == 0);
  CHECK(f.zap->accepted() == 1);
}

TEST_CASE("a subscriber with an unregistered key receives no events") {
  test::curve_fixture f;
  publisher pub(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*", "scheduler");
  subscriber sub(f.ctx, pub.endpoint(), f.server.public_z85, generate_keypair());
  sub.subscribe("");
  for (int i = 0; i < 10; ++i) {
    pub.publish("job.started", "t", "b");
    CHECK(sub.recv(50ms).code() == errc::deadline_exceeded);
  }
  CHECK(f.zap->rejected() >= 1);
  CHECK(f.zap->accepted() == 0);
}
