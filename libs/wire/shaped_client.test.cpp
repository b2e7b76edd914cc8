// The link shaper on real ZeroMQ traffic: a CURVE client whose requests and
// replies cross an emulated link to a router on loopback.
#include "libs/wire/client.hpp"
#include "libs/wire/link_spec.hpp"
#include "libs/wire/test_util.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {
// Request ids the server saw, shared with its thread.
struct id_log {
  std::mutex mu;
  std::vector<std::string> ids;
  void add(const std::string& id) {
    std::lock_guard lock(mu);
    ids.push_back(id);
  }
  std::vector<std::string> get() {
    std::lock_guard lock(mu);
    return ids;
  }
};

// A router that logs each request id and answers with a small reply.
struct echo_server {
  test::curve_fixture f;
  router_server srv{f.ctx, f.server, f.domain, "tcp://127.0.0.1:*"};
  id_log log;
  test::served s{srv, [this](router_server& r, const router_server::incoming& in) {
                   if (!in.req) return;
                   log.add(in.req->request_id);
                   reply rep;
                   rep.request_id = in.req->request_id;
                   rep.type = in.req->type;
                   rep.body = std::to_string(in.req->body.size());
                   r.send(in.identity, rep);
                 }};

  client make(const std::string& spec, std::chrono::milliseconds timeout, int retries,
              std::function<void(const link_observation&)> observe = {}) {
    client_options o{timeout, retries};
    o.link = parse_link_spec(spec).value();
    o.observe = std::move(observe);
    return client(f.ctx, srv.endpoint(), f.server.public_z85, f.alice, std::move(o));
  }
};

request sized(std::string id, std::size_t body_bytes) {
  request req;
  req.request_id = std::move(id);
  req.type = "loom.v1.PingRequest";
  req.body.assign(body_bytes, 'x');
  return req;
}

double ms_since(steady::time_point t) { return std::chrono::duration<double, std::milli>(steady::now() - t).count(); }
}  // namespace

TEST_CASE("a 500 kB request over a 1 MB/s link with 50 ms latency each way takes the modelled time") {
  echo_server s;
  link_monitor monitor;
  client c = s.make("bw=1MB,burst=16KiB,lat=50ms", 5000ms, 0,
                    [&](const link_observation& o) { monitor.observe("server", o); });
  // A small call first: one RTT of 2 x 50 ms, and the connection is up.
  auto t0 = steady::now();
  REQUIRE(c.call(sized("", 10)).ok());
  const double ping_ms = ms_since(t0);
  CHECK(ping_ms >= 100.0);
  CHECK(ping_ms < 400.0);

  double plain_ms = 0;  // the same call on the real loopback, for the report
  {
    client plain = s.make("none", 5000ms, 0);
    REQUIRE(plain.call(sized("", 10)).ok());
    auto tp = steady::now();
    REQUIRE(plain.call(sized("", 500'000)).ok());
    plain_ms = ms_since(tp);
  }
  t0 = steady::now();
  auto rep = c.call(sized("", 500'000));
  const double took_ms = ms_since(t0);
  REQUIRE(rep.ok());
  CHECK(rep->body == "500000");
  // Uplink: (500 kB + envelope - 16 KiB burst) / 1 MB/s + 50 ms; downlink: 50 ms.
  const double expected_ms = (500'000.0 - 16'384.0) / 1e3 + 100.0;
  CHECK(took_ms >= expected_ms - 1.0);
  CHECK(took_ms < expected_ms + 400.0);
  MESSAGE("shaped 500 kB call " << took_ms << " ms (model " << expected_ms << " ms, unshaped " << plain_ms
                                 << " ms); shaped ping " << ping_ms << " ms (model 100 ms)");

  auto e = monitor.estimate("server", std::chrono::duration_cast<link_time>(steady::now().time_since_epoch()));
  CHECK(e.state == link_state::up);
  REQUIRE(e.min_rtt.has_value());
  CHECK(*e.min_rtt >= 100ms);
  REQUIRE(e.bandwidth_bytes_per_s.has_value());
  CHECK(*e.bandwidth_bytes_per_s > 0.7e6);
  CHECK(*e.bandwidth_bytes_per_s < 1.3e6);
}

TEST_CASE("during an outage calls time out, and they succeed once it ends") {
  echo_server s;
  link_monitor monitor;
  auto now = [] { return std::chrono::duration_cast<link_time>(steady::now().time_since_epoch()); };
  const auto start = steady::now();
  client c = s.make("down=0ms-700ms", 200ms, 0, [&](const link_observation& o) { monitor.observe("server", o); });
  auto lost = c.call(sized("during", 10));
  REQUIRE_FALSE(lost.ok());
  CHECK(lost.code() == errc::unavailable);

  // Same client, so the same link (its outage counts from its construction):
  // call again until the window has passed.
  std::optional<result<reply>> ok;
  bool saw_down = false;
  for (int i = 0; i < 8 && !(ok && ok->ok()); ++i) {
    ok = c.call(sized("after", 10));
    saw_down = saw_down || monitor.estimate("server", now()).state == link_state::down;
  }
  REQUIRE(ok->ok());
  CHECK(ms_since(start) >= 700.0);
  CHECK(ms_since(start) < 3000.0);
  CHECK(c.uplink()->model().dropped_outage() >= 3);  // every attempt inside [0, 700 ms)
  CHECK(saw_down);                                   // three unanswered in a row
  auto e = monitor.estimate("server", now());
  CHECK(e.state == link_state::degraded);  // back, but most recent exchanges failed
  CHECK(e.reason.find("exchanges failed") != std::string::npos);
  CHECK(e.consecutive_failures == 0);
  // Nothing sent during the outage reached the server.
  for (int i = 0; i < 50 && s.log.get().empty(); ++i) std::this_thread::sleep_for(10ms);
  CHECK(s.log.get() == std::vector<std::string>{"after"});
}

TEST_CASE("the same seed drops the same requests on a real socket, as the model predicts") {
  const std::string spec = "loss=30%,seed=7";
  auto delivered = [&](const std::string& sp) {
    echo_server s;
    client c = s.make(sp, 2000ms, 0);
    for (int i = 0; i < 40; ++i) REQUIRE(c.send_async(sized(std::to_string(i), 10)));
    while (c.recv(300ms).ok()) {
    }
    for (int i = 0; i < 20 && s.log.get().size() < 40 - c.uplink()->model().dropped_loss(); ++i)
      std::this_thread::sleep_for(10ms);
    return s.log.get();
  };
  link_shaper model(parse_link_spec(spec).value(), 0);  // stream 0: the uplink
  std::vector<std::string> expected;
  for (int i = 0; i < 40; ++i)
    if (!model.admit(link_time(0), 10).dropped) expected.push_back(std::to_string(i));
  CHECK(expected.size() > 20);
  CHECK(expected.size() < 36);
  const auto first = delivered(spec);
  CHECK(first == expected);
  CHECK(delivered(spec) == first);
  CHECK(delivered("loss=30%,seed=8") != first);
}

TEST_CASE("a shaped queue holds messages until they are due and releases them in order") {
  link_config c;
  c.latency = 30ms;
  const auto t0 = steady::now();
  shaped_queue q(c, 0, t0);
  for (int i = 0; i < 3; ++i) {
    multipart m;
    const std::string id = std::to_string(i), payload = "payload";
    m.emplace_back(id.data(), id.size());
    m.emplace_back(payload.data(), payload.size());
    CHECK_FALSE(q.push(std::move(m), t0 + std::chrono::milliseconds(i)).dropped);
  }
  CHECK(q.held() == 3);
  CHECK(*q.next_due() == t0 + 30ms);
  CHECK_FALSE(q.pop_due(t0 + 29ms).has_value());
  auto m = q.pop_due(t0 + 31ms);
  REQUIRE(m.has_value());
  CHECK(m->size() == 2);
  CHECK((*m)[0].to_string() == "0");
  CHECK_FALSE(q.pop_due(t0 + 30500us).has_value());  // the second is due at 31 ms
  CHECK((*q.pop_due(t0 + 40ms))[0].to_string() == "1");
  q.clear();
  CHECK(q.held() == 0);
  CHECK(q.cleared() == 1);
  CHECK_FALSE(q.next_due().has_value());
}
