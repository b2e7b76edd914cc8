#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/test_util.hpp"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;

namespace {
// What the test server saw, shared with its thread.
struct seen_log {
  std::mutex mu;
  std::vector<request> requests;
  void add(const request& r) {
    std::lock_guard lock(mu);
    requests.push_back(r);
  }
  std::vector<request> get() {
    std::lock_guard lock(mu);
    return requests;
  }
};

request ping(std::string id = "") {
  request req;
  req.request_id = std::move(id);
  req.type = "loom.v1.PingRequest";
  return req;
}

reply echo(const request& req) {
  reply rep;
  rep.request_id = req.request_id;
  rep.type = req.type;
  rep.body = std::to_string(req.attempt);
  return rep;
}
}  // namespace

TEST_CASE("a call whose first attempt is ignored succeeds on the second with the same request_id") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  seen_log log;
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    log.add(*in.req);
    if (in.req->attempt >= 2) r.send(in.identity, echo(*in.req));
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {300ms, 2});
  auto rep = c.call(ping());
  REQUIRE(rep.ok());
  CHECK(rep->body == "2");
  CHECK(c.retried() == 1);
  auto seen = log.get();
  REQUIRE(seen.size() == 2);
  CHECK(seen[0].attempt == 1);
  CHECK(seen[1].attempt == 2);
  CHECK(seen[0].request_id == seen[1].request_id);
  CHECK(seen[0].request_id.size() == 32);
}

TEST_CASE("a call to a server that never answers is unavailable after its retries, in bounded time") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  seen_log log;
  test::served s(srv, [&](router_server&, const router_server::incoming& in) {
    if (in.req) log.add(*in.req);
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {200ms, 2});
  const auto start = std::chrono::steady_clock::now();
  auto rep = c.call(ping());
  const auto elapsed = std::chrono::steady_clock::now() - start;
  REQUIRE_FALSE(rep.ok());
  CHECK(rep.code() == errc::unavailable);
  CHECK(rep.err().message == "no reply from " + srv.endpoint() + " after 3 attempts");
  CHECK(elapsed >= 600ms);
  CHECK(elapsed < 3000ms);
  for (int i = 0; i < 100 && log.get().size() < 3; ++i) std::this_thread::sleep_for(10ms);
  auto seen = log.get();
  REQUIRE(seen.size() == 3);
  CHECK(seen[2].attempt == 3);
}

TEST_CASE("replies to other requests arriving during a call are discarded") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    if (in.req->request_id == "wanted") {
      r.send(in.identity, error_reply("stale-id", errc::internal, "late reply to something else"));
    }
    r.send(in.identity, echo(*in.req));
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {2000ms, 0});
  REQUIRE(c.send_async(ping("earlier")));
  auto rep = c.call(ping("wanted"));
  REQUIRE(rep.ok());
  CHECK(rep->request_id == "wanted");
  CHECK(c.discarded() == 2);  // the reply to "earlier" and the stale one
}

TEST_CASE("pipelined requests come back through recv in order") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (in.req) r.send(in.identity, echo(*in.req));
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice);
  for (int i = 0; i < 100; ++i) REQUIRE(c.send_async(ping(std::to_string(i))));
  for (int i = 0; i < 100; ++i) {
    auto rep = c.recv(5000ms);
    REQUIRE(rep.ok());
    CHECK(rep->request_id == std::to_string(i));
  }
  CHECK(c.recv(50ms).code() == errc::deadline_exceeded);
}

TEST_CASE("a malformed request is answered with an error the client can match") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) r.send(in.identity, error_reply(in.request_id, in.req.code(), in.req.err().message));
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {2000ms, 0});
  request no_type;
  auto rep = c.call(no_type);
  REQUIRE(rep.ok());
  CHECK(rep->code == errc::invalid_argument);
  CHECK(rep->message.find("has no type") != std::string::npos);
}

TEST_CASE("a request over the body limit is refused at once and never sent, and a server answers one sent anyway") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  seen_log log;
  std::atomic<int> malformed{0};
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (in.req) {
      log.add(*in.req);
      r.send(in.identity, echo(*in.req));
      return;
    }
    ++malformed;
    r.send(in.identity, error_reply(in.request_id, in.req.code(), in.req.err().message));
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {30000ms, 1});
  request big = ping("big-one");
  big.body.assign(30u << 20, 'x');  // a 30 MB SubmitJob, say
  auto rep = c.call(big);
  REQUIRE_FALSE(rep.ok());
  CHECK(rep.code() == errc::invalid_argument);
  CHECK(rep.err().message.find("over the 16 MiB a request may carry") != std::string::npos);
  CHECK(c.retried() == 0);
  // Nothing was sent: on the same connection, a ping after it is the first thing the server sees.
  REQUIRE(c.call(ping("after")).ok());
  REQUIRE(log.get().size() == 1);
  CHECK(log.get()[0].request_id == "after");
  CHECK(malformed == 0);
  // A peer that sends one anyway (a raw DEALER): the server's refusal names its request id.
  zmq::socket_t raw(f.ctx, zmq::socket_type::dealer);
  raw.set(zmq::sockopt::linger, 0);
  make_curve_client(raw, f.alice, f.server.public_z85);
  raw.connect(srv.endpoint());
  const std::string bytes = encode(big);
  raw.send(zmq::buffer(bytes), zmq::send_flags::none);
  raw.set(zmq::sockopt::rcvtimeo, 60000);  // a deadline for an answer that must come (30 MB through CURVE)
  zmq::message_t back;
  REQUIRE(raw.recv(back, zmq::recv_flags::none).has_value());
  auto answer = decode_reply(back.data(), back.size());
  REQUIRE(answer.ok());
  CHECK(answer->request_id == "big-one");
  CHECK(answer->code == errc::invalid_argument);
  CHECK(answer->message.find("body too large") != std::string::npos);
  CHECK(malformed == 1);
  CHECK(log.get().size() == 1);
}

TEST_CASE("call_typed returns the typed body, or the reply's error code and message") {
  test::curve_fixture f;
  router_server srv(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served s(srv, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    if (auto p = parse_body<v1::PingRequest>(*in.req)) {
      v1::PingReply pong;
      pong.set_payload(p->payload());
      pong.set_service("test");
      r.send(in.identity, ok_reply(*in.req, pong));
    } else {
      r.send(in.identity, error_reply(in.req->request_id, errc::permission_denied, "not for " + in.req->token));
    }
  });
  client c(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, {2000ms, 0});
  v1::PingRequest p;
  p.set_payload("abc");
  auto pong = call_typed<v1::PingReply>(c, p, "tok");
  REQUIRE(pong.ok());
  CHECK(pong->payload() == "abc");
  CHECK(pong->service() == "test");

  auto denied = call_typed<v1::HealthReply>(c, v1::HealthRequest(), "bob");
  REQUIRE_FALSE(denied.ok());
  CHECK(denied.code() == errc::permission_denied);
  CHECK(denied.err().message == "not for bob");
}
