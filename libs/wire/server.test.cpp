#include "libs/wire/server.hpp"
#include "libs/wire/test_util.hpp"

#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <random>
#include <sys/eventfd.h>
#include <unistd.h>
#include <zmq_addon.hpp>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;

namespace {
// A raw DEALER presenting alice's key, for sending frames router_server must survive.
std::unique_ptr<zmq::socket_t> raw_dealer(test::curve_fixture& f, const std::string& ep) {
  auto d = std::make_unique<zmq::socket_t>(f.ctx, zmq::socket_type::dealer);
  test::bounded(*d);
  make_curve_client(*d, f.alice, f.server.public_z85);
  d->connect(ep);
  return d;
}

std::string valid_request_bytes(const std::string& id) {
  request req;
  req.request_id = id;
  req.type = "loom.v1.PingRequest";
  return encode(req);
}
}  // namespace

TEST_CASE("a client with a registered key round-trips and the router sees its principal") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  CHECK(srv.endpoint().rfind("tcp://127.0.0.1:", 0) == 0);
  CHECK(srv.endpoint() != "tcp://127.0.0.1:*");
  auto d = raw_dealer(f, srv.endpoint());
  REQUIRE(d->send(zmq::buffer(valid_request_bytes("id-1"))));

  auto in = srv.poll(5000ms);
  REQUIRE(in.has_value());
  REQUIRE(in->req.ok());
  CHECK(in->req->request_id == "id-1");
  CHECK(in->peer_principal == "alice");
  CHECK(in->frames == 2);
  CHECK(f.zap->accepted() == 1);

  reply rep;
  rep.request_id = "id-1";
  rep.body = "pong";
  REQUIRE(srv.send(in->identity, rep));
  zmq::message_t back;
  REQUIRE(d->recv(back));
  auto got = decode_reply(back.data(), back.size());
  REQUIRE(got.ok());
  CHECK(got->request_id == "id-1");
  CHECK(got->body == "pong");
  CHECK(srv.sent() == 1);
  CHECK_FALSE(srv.send("no-such-peer", rep));  // unroutable: reported, not thrown
}

TEST_CASE("router_server.poll turns garbage multipart into error incomings and keeps serving") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  auto d = raw_dealer(f, srv.endpoint());

  // 1. three frames
  std::array<zmq::const_buffer, 3> three = {zmq::str_buffer("a"), zmq::str_buffer("b"), zmq::str_buffer("c")};
  REQUIRE(zmq::send_multipart(*d, three));
  auto in = srv.poll(5000ms);
  REQUIRE(in.has_value());
  REQUIRE_FALSE(in->req.ok());
  CHECK(in->frames == 4);
  CHECK(in->req.err().message.find("expected 2 frames") != std::string::npos);
  CHECK_FALSE(in->identity.empty());

  // 2. an empty frame
  REQUIRE(d->send(zmq::message_t(), zmq::send_flags::none));
  in = srv.poll(5000ms);
  REQUIRE(in.has_value());
  REQUIRE_FALSE(in->req.ok());
  CHECK(in->req.err().message.find("empty frame") != std::string::npos);

  // 3. 100 KB of (seeded, so repeatable) random bytes
  std::mt19937 rng(42);
  std::string noise(100 * 1024, '\0');
  for (auto& c : noise) c = static_cast<char>(rng());
  REQUIRE(d->send(zmq::buffer(noise)));
  in = srv.poll(5000ms);
  REQUIRE(in.has_value());
  REQUIRE_FALSE(in->req.ok());
  CHECK(in->req.err().message.find("not a valid loom.v1.Envelope") != std::string::npos);

  // ... and a good request still goes through.
  REQUIRE(d->send(zmq::buffer(valid_request_bytes("after-garbage"))));
  in = srv.poll(5000ms);
  REQUIRE(in.has_value());
  REQUIRE(in->req.ok());
  CHECK(in->req->request_id == "after-garbage");
  CHECK(srv.received() == 4);
  CHECK(srv.malformed() == 3);
}

TEST_CASE("a frame over the size cap never reaches the router") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  auto d = raw_dealer(f, srv.endpoint());
  CHECK(d->get(zmq::sockopt::maxmsgsize) == max_message_bytes);
  zmq::message_t big(static_cast<std::size_t>(max_message_bytes) + 1);
  REQUIRE(d->send(big, zmq::send_flags::none));
  CHECK_FALSE(srv.poll(1500ms).has_value());
  CHECK(srv.received() == 0);
}

TEST_CASE("poll returns early when the extra fd becomes readable") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  const int efd = ::eventfd(0, EFD_NONBLOCK);
  REQUIRE(efd >= 0);
  bool ready = false;
  CHECK_FALSE(srv.poll(10ms, efd, &ready).has_value());
  CHECK_FALSE(ready);
  std::uint64_t one = 1;
  REQUIRE(::write(efd, &one, sizeof one) == sizeof one);
  const auto start = std::chrono::steady_clock::now();
  CHECK_FALSE(srv.poll(5000ms, efd, &ready).has_value());
  CHECK(ready);
  CHECK(std::chrono::steady_clock::now() - start < 1000ms);
  ::close(efd);
}
