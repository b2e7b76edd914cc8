#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/test_util.hpp"
#include "loom/v1/replica.pb.h"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
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

namespace {
// A standby's answer (as libs/runtime/replica_logic.cpp makes it).
reply not_leader(const request& req, const std::string& leader, const std::string& endpoint) {
  loom::v1::NotLeader nl;
  nl.set_service("scheduler");
  nl.set_replica("standby@test");
  nl.set_leader(leader);
  nl.set_leader_endpoint(endpoint);
  nl.set_epoch(3);
  reply rep;
  rep.request_id = req.request_id;
  rep.code = errc::unavailable;
  rep.message = "standby@test is a standby scheduler replica";
  rep.type = std::string(not_leader_type);
  rep.body = nl.SerializeAsString();
  return rep;
}
}  // namespace

TEST_CASE("a replica set: a standby's redirect is followed to the leader it names, with the same request_id") {
  test::curve_fixture f;
  router_server leader(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  router_server standby(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  seen_log at_leader, at_standby;
  test::served l(leader, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    at_leader.add(*in.req);
    r.send(in.identity, echo(*in.req));
  });
  test::served s(standby, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    at_standby.add(*in.req);
    r.send(in.identity, not_leader(*in.req, "leader@test", leader.endpoint()));
  });
  client c(f.ctx, std::vector<std::string>{standby.endpoint(), leader.endpoint()}, f.server.public_z85, f.alice,
           {1000ms, 2});
  auto rep = c.call(ping("rid-1"));
  REQUIRE_MESSAGE(rep.ok(), (rep.ok() ? "" : rep.err().to_string()));
  CHECK(rep->ok());
  CHECK(c.endpoint() == leader.endpoint());
  CHECK(c.failovers() == 1);
  REQUIRE(at_standby.get().size() == 1);
  REQUIRE(at_leader.get().size() == 1);
  CHECK(at_leader.get()[0].request_id == "rid-1");
  // The next call goes straight to the leader.
  REQUIRE(c.call(ping("rid-2")).ok());
  CHECK(at_standby.get().size() == 1);
}

TEST_CASE("a replica set: a silent replica is left after the attempt's timeout and the call succeeds on the next") {
  test::curve_fixture f;
  router_server dead(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");  // accepts, never answers
  router_server live(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  test::served d(dead, [&](router_server&, const router_server::incoming&) {});
  test::served l(live, [&](router_server& r, const router_server::incoming& in) {
    if (in.req) r.send(in.identity, echo(*in.req));
  });
  client c(f.ctx, std::vector<std::string>{dead.endpoint(), live.endpoint()}, f.server.public_z85, f.alice,
           client_options{300ms, 2});
  const auto t0 = std::chrono::steady_clock::now();
  auto rep = c.call(ping());
  const auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE(rep.ok());
  CHECK(c.endpoint() == live.endpoint());
  CHECK(took < 850ms);  // one attempt's timeout, not the whole budget
}

TEST_CASE("a replica set: a replica that goes away mid-call (its connection drops) is left at once, long before the timeout") {
  test::curve_fixture f;
  auto dying = std::make_unique<router_server>(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  router_server live(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  std::atomic<bool> got{false};
  auto silent = std::make_unique<test::served>(*dying, [&](router_server&, const router_server::incoming& in) {
    if (in.req) got = true;  // takes the request, never answers
  });
  test::served l(live, [&](router_server& r, const router_server::incoming& in) {
    if (in.req) r.send(in.identity, echo(*in.req));
  });
  client c(f.ctx, std::vector<std::string>{dying->endpoint(), live.endpoint()}, f.server.public_z85, f.alice,
           client_options{5000ms, 1});
  std::thread killer([&] {  // the replica's process dies once the request is in it
    for (int i = 0; i < 2000 && !got; ++i) std::this_thread::sleep_for(1ms);
    silent.reset();
    dying.reset();
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto rep = c.call(ping());
  const auto took = std::chrono::steady_clock::now() - t0;
  killer.join();
  REQUIRE(got);
  REQUIRE(rep.ok());
  CHECK(c.endpoint() == live.endpoint());
  CHECK(took < 2500ms);  // the dropped connection, not the 5 s timeout
}

TEST_CASE("a replica set: a redirect to an address outside the set is not followed, and with no leader the call ends unavailable naming the last answer") {
  test::curve_fixture f;
  router_server a(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  router_server b(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");
  router_server elsewhere(f.ctx, f.server, f.domain, "tcp://127.0.0.1:*");  // a forged "leader"
  std::atomic<int> forged{0};
  test::served e(elsewhere, [&](router_server& r, const router_server::incoming& in) {
    if (!in.req) return;
    ++forged;
    r.send(in.identity, echo(*in.req));
  });
  auto standby = [&](router_server& r, const router_server::incoming& in) {
    if (in.req) r.send(in.identity, not_leader(*in.req, "mallory", elsewhere.endpoint()));
  };
  test::served sa(a, standby);
  test::served sb(b, standby);
  client c(f.ctx, std::vector<std::string>{a.endpoint(), b.endpoint()}, f.server.public_z85, f.alice, {200ms, 1});
  const auto t0 = std::chrono::steady_clock::now();
  auto rep = c.call(ping());
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);
  REQUIRE(!rep.ok());
  CHECK(rep.code() == errc::unavailable);
  CHECK(rep.err().message.find("is a standby") != std::string::npos);
  CHECK(forged == 0);
}
