// site_client without an aggregator: options are checked, and a request that
// nobody answers gives up after its bounded attempts with unavailable.
// The protocol itself is tested across processes (tests/diloco_rounds.test.cpp).
#include "libs/diloco/client/site_client.hpp"

#include "libs/wire/link_spec.hpp"
#include "libs/wire/shaped_link.hpp"

#include <doctest/doctest.h>
#include <zmq.hpp>

#include <chrono>

using namespace loom;
using namespace std::chrono_literals;

namespace {

diloco::client_options good() {
  diloco::client_options o;
  o.endpoint = "tcp://127.0.0.1:9";  // discard: nothing answers there
  o.server_public = wire::generate_keypair().public_z85;
  o.keys = wire::generate_keypair();
  o.job = "j";
  o.site = "s";
  o.timeout = 100ms;
  o.attempts = 2;
  return o;
}

}  // namespace

TEST_CASE("a site client needs keys, a job, a site and positive bounds") {
  zmq::context_t ctx(1);
  auto o = good();
  o.server_public = "short";
  CHECK(diloco::site_client::make(ctx, o).code() == errc::invalid_argument);
  o = good();
  o.site.clear();
  CHECK(diloco::site_client::make(ctx, o).code() == errc::invalid_argument);
  o = good();
  o.attempts = 0;
  CHECK(diloco::site_client::make(ctx, o).code() == errc::invalid_argument);
}

TEST_CASE("a join nobody answers fails with unavailable after its attempts, in about attempts x timeout") {
  zmq::context_t ctx(1);
  auto c = diloco::site_client::make(ctx, good()).value();
  std::vector<float> local;
  const auto t0 = std::chrono::steady_clock::now();
  auto s = c->join(local);
  const auto took = std::chrono::steady_clock::now() - t0;
  CHECK(s.code() == errc::unavailable);
  CHECK(s.err().message.find("after 2 attempts of 100 ms") != std::string::npos);
  CHECK(took >= 190ms);
  CHECK(took < 2s);
  std::vector<float> x(4);
  CHECK(c->poll(0, x).code() == errc::conflict);  // not joined
}

TEST_CASE("a site client refuses an emulated link that is not valid, naming the field") {
  zmq::context_t ctx(1);
  auto o = good();
  o.link = wire::link_config{};
  o.link->bandwidth = -1;
  auto c = diloco::site_client::make(ctx, o);
  REQUIRE_FALSE(c.ok());
  CHECK(c.code() == errc::invalid_argument);
  CHECK(c.err().message.find("site client: link: ") == 0);
  o.link = wire::link_config{};  // a perfect link: the real socket only
  auto plain = diloco::site_client::make(ctx, o).value();
  CHECK(plain->link() == nullptr);
  o.link->latency = std::chrono::milliseconds(5);
  CHECK(diloco::site_client::make(ctx, o).value()->link() != nullptr);
}

TEST_CASE("a site client whose link is down drops its requests on the emulated wire and gives up like a dead peer") {
  zmq::context_t ctx(1);
  auto o = good();
  o.link = wire::parse_link_spec("down=0s-1h").value();
  auto c = diloco::site_client::make(ctx, o).value();
  std::vector<float> local;
  CHECK(c->join(local).code() == errc::unavailable);
  REQUIRE(c->link() != nullptr);
  CHECK(c->link()->uplink().held() == 0);  // dropped at once, never sent
}
