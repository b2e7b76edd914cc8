// Cross-process security checks against a running `loom up`: tokens at every
// gateway (role, expiry, forgery, zone, revocation), denials counted in
// metrics and recorded as audit events, CURVE refusing unknown keys and
// plaintext, and the admin-only crash hook driving supervision.
#include "tests/support/cluster.hpp"

#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/audit.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>

#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;

namespace {

wire::reply send(wire::client& c, const google::protobuf::Message& m, const std::string& token,
                 const std::string& rid = "") {
  wire::request req;
  req.request_id = rid.empty() ? wire::new_request_id() : rid;
  req.type = m.GetDescriptor()->full_name();
  req.body = m.SerializeAsString();
  req.token = token;
  auto r = c.call(req);
  REQUIRE_MESSAGE(r.ok(), "no reply: " << (r.ok() ? "" : r.err().message));
  return *r;
}

// Sum of a metric family's samples in a Prometheus text exposition.
double metric_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::size_t pos = 0;
  while ((pos = text.find("\n" + name, pos)) != std::string::npos) {
    pos += 1;
    auto eol = text.find('\n', pos);
    auto line = text.substr(pos, eol - pos);
    auto rest = line.substr(name.size());
    if (rest.empty() || (rest[0] != '{' && rest[0] != ' ')) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

std::vector<v1::AuditEvent> audit_events(cluster& c, const std::string& request_id) {
  auto cli = c.client("audit");
  v1::AuditQueryRequest q;
  q.set_request_id(request_id);
  std::vector<v1::AuditEvent> out;
  for (int i = 0; i < 100; ++i) {
    auto rep = send(*cli, q, c.admin());
    REQUIRE_MESSAGE(rep.ok(), rep.message);
    v1::AuditQueryReply r;
    REQUIRE(r.ParseFromString(rep.body));
    if (r.events_size() > 0) {
      out.assign(r.events().begin(), r.events().end());
      break;
    }
    std::this_thread::sleep_for(50ms);
  }
  return out;
}

}  // namespace

TEST_CASE("every kind of bad token is denied, counted and audited, and good ones pass") {
  cluster c;
  REQUIRE(c.up);
  auto sched = c.client("scheduler");
  REQUIRE(sched);
  v1::DrainNodeRequest drain;  // operator-level, state-changing
  drain.mutable_node()->set_value("no-such-node");

  struct attempt {
    const char* what;
    std::string token;
    errc expect;
    std::string reason_has;
  };
  std::string forged = c.token(auth::role::admin);
  forged[forged.size() - 3] = forged[forged.size() - 3] == 'A' ? 'B' : 'A';
  std::vector<attempt> bad = {
      {"viewer calling an operator request", c.token(auth::role::viewer), errc::permission_denied, "needs operator"},
      {"expired token", c.token(auth::role::admin, {"*"}, -10), errc::unauthenticated, "expired"},
      {"forged token", forged, errc::unauthenticated, "signature"},
      {"wrong zone", c.token(auth::role::admin, {"edge-far-away"}), errc::permission_denied, "zone"},
      {"no token", "", errc::unauthenticated, ""},
      {"garbage token", "lt1.garbage", errc::unauthenticated, ""},
  };
  std::vector<std::string> denied_ids;
  for (auto& b : bad) {
    INFO(b.what);
    auto rid = wire::new_request_id();
    auto rep = send(*sched, drain, b.token, rid);
    CHECK(rep.code == b.expect);
    CHECK(rep.message.find(b.reason_has) != std::string::npos);
    denied_ids.push_back(rid);
  }

  // An operator token passes authorization (the node is unknown: not_found).
  auto ok = send(*sched, drain, c.token(auth::role::operator_, {"local"}));
  CHECK(ok.code == errc::not_found);
  // A viewer may read.
  CHECK(send(*sched, v1::ListNodesRequest{}, c.token(auth::role::viewer, {"local"})).code == errc::ok);

  // Revocation: bump the epoch; a token of the old epoch is refused within ~1 s.
  auto old_token = c.token(auth::role::admin, {"*"}, 600, 0);
  CHECK(send(*sched, v1::PingRequest{}, old_token).code == errc::ok);
  REQUIRE(run_loom(c.home.path(), {"token", "revoke-all"}).code == 0);
  wire::reply revoked;
  for (int i = 0; i < 40; ++i) {
    revoked = send(*sched, v1::PingRequest{}, old_token);
    if (revoked.code != errc::ok) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK(revoked.code == errc::unauthenticated);
  CHECK(revoked.message.find("revoked") != std::string::npos);
  CHECK(send(*sched, v1::PingRequest{}, c.token(auth::role::viewer, {"*"}, 600, 1)).code == errc::ok);

  // Each denial was counted ...
  auto text = http_get(c.ep("scheduler").metrics, "/metrics");
  CHECK(metric_sum(text, "loom_scheduler_denied_total") >= static_cast<double>(bad.size()) + 1);
  // ... and recorded once as an audit event with decision DENY and its reason.
  for (std::size_t i = 0; i < denied_ids.size(); ++i) {
    INFO(bad[i].what);
    auto evs = audit_events(c, denied_ids[i]);
    REQUIRE(evs.size() == 1);
    CHECK(evs[0].decision() == v1::DENY);
    CHECK(evs[0].service() == "scheduler");
    CHECK(evs[0].action() == "loom.v1.DrainNodeRequest");
    CHECK_FALSE(evs[0].reason().empty());
    CHECK(evs[0].peer_key() == "client");
  }
}

TEST_CASE("a service refuses unknown CURVE keys and plaintext clients") {
  cluster c;
  REQUIRE(c.up);
  const auto& ep = c.ep("trainer").rpc;
  auto server_key = *wire::load_public_key(c.paths.curve_dir(), "trainer");
  int refused = 0;
  constexpr int attempts = 100;
  for (int i = 0; i < attempts; ++i) {
    zmq::socket_t s(c.ctx, zmq::socket_type::dealer);
    s.set(zmq::sockopt::linger, 0);
    wire::make_curve_client(s, wire::generate_keypair(), server_key);
    std::string mon = "inproc://mon-" + std::to_string(i);
    REQUIRE(zmq_socket_monitor(s.handle(), mon.c_str(), ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_SUCCEEDED) == 0);
    zmq::socket_t m(c.ctx, zmq::socket_type::pair);
    m.set(zmq::sockopt::rcvtimeo, 3000);
    m.connect(mon);
    s.connect(ep);
    zmq::message_t ev;
    if (m.recv(ev)) {
      std::uint16_t id;
      std::memcpy(&id, ev.data(), 2);
      refused += id == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
      zmq::message_t addr;
      (void)m.recv(addr);
    }
    zmq_socket_monitor(s.handle(), nullptr, 0);
  }
  CHECK(refused == attempts);

  zmq::socket_t plain(c.ctx, zmq::socket_type::dealer);
  plain.set(zmq::sockopt::linger, 0);
  plain.set(zmq::sockopt::rcvtimeo, 700);
  plain.connect(ep);
  wire::request req;
  req.request_id = wire::new_request_id();
  req.type = "loom.v1.PingRequest";
  req.token = c.admin();
  auto bytes = wire::encode(req);
  (void)plain.send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  zmq::message_t back;
  CHECK_FALSE(plain.recv(back).has_value());

  // The registered client still gets through.
  auto ok = c.client("trainer");
  CHECK(send(*ok, v1::PingRequest{}, c.admin()).code == errc::ok);
}

TEST_CASE("the admin-only crash hook restarts the service actor inside the same process") {
  cluster c;
  REQUIRE(c.up);
  auto cli = c.client("aggregator");
  v1::CrashRequest crash;
  crash.set_reason("supervision test");
  CHECK(send(*cli, crash, c.token(auth::role::operator_)).code == errc::permission_denied);
  auto rep = send(*cli, crash, c.admin());
  CHECK(rep.code == errc::unavailable);  // the call that crashed the actor
  v1::HealthReply h;
  for (int i = 0; i < 50; ++i) {
    auto hr = send(*cli, v1::HealthRequest{}, c.admin());
    REQUIRE(h.ParseFromString(hr.body));
    if (h.restarts() >= 1) break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(h.restarts() == 1);
  CHECK(h.pid() == static_cast<std::uint32_t>(c.ep("aggregator").pid));
  CHECK(send(*cli, v1::PingRequest{}, c.admin()).code == errc::ok);
  auto text = http_get(c.ep("aggregator").metrics, "/metrics");
  CHECK(text.find("loom_aggregator_restarts_total 1") != std::string::npos);
}
