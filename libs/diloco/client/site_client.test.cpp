// site_client without an aggregator: options are checked, and a request that
// nobody answers gives up after its bounded attempts with unavailable.
// The protocol itself is tested across processes (tests/diloco_rounds.test.cpp).
#include "libs/diloco/client/site_client.hpp"

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
