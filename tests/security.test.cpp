// Cross-process security checks against a running `loom up`: tokens at every
// gateway (role, expiry, forgery, zone, revocation), denials counted in
// metrics and recorded as audit events, repeated identical denials merged
// into one counted record, tenants carried from the token to the service,
// principal and tenant names refused outside their charset, CURVE refusing
// unknown keys and plaintext, and the admin-only crash hook driving supervision.
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/audit.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

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

v1::PingReply ping_as(cluster& c, const std::string& token) {
  auto cli = c.client("trainer");
  auto rep = send(*cli, v1::PingRequest{}, token);
  REQUIRE_MESSAGE(rep.ok(), rep.message);
  v1::PingReply p;
  REQUIRE(p.ParseFromString(rep.body));
  return p;
}

// A token in the encoding used before tenants existed (its payload ends after
// issued_unix_s), signed with the deployment's key.
std::string pre_tenant_token(const std::string& key, const std::string& principal) {
  auto put = [](std::string& out, std::uint64_t v, int bytes) {
    for (int shift = 8 * (bytes - 1); shift >= 0; shift -= 8) out += static_cast<char>(v >> shift & 0xff);
  };
  const auto now = static_cast<std::uint64_t>(std::time(nullptr));
  std::string p;
  put(p, principal.size(), 4);
  p += principal;
  put(p, 1, 1);  // viewer
  put(p, 1, 4);
  put(p, 1, 4);
  p += "*";
  put(p, now + 600, 8);
  put(p, 0, 8);
  put(p, now, 8);
  std::string signed_part = "lt1." + crypto::base64url_encode(p);
  return signed_part + "." + crypto::base64url_encode(crypto::as_view(crypto::hmac_sha256(key, signed_part)));
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

TEST_CASE("a stale token retried 200 times leaves one deny record at once and one counted summary after the window") {
  cluster c;
  REQUIRE(c.up);
  auto sched = c.client("scheduler");
  const std::string stale = c.token(auth::role::admin, {"*"}, -10, 0, "stale-admin");
  std::vector<std::string> rids;
  std::string reason;
  for (int i = 0; i < 200; ++i) {
    rids.push_back(wire::new_request_id());
    auto rep = send(*sched, v1::HealthRequest{}, stale, rids.back());
    CHECK(rep.code == errc::unauthenticated);  // every attempt is answered, merged or not
    reason = rep.message;
  }
  REQUIRE(reason.find("expired") != std::string::npos);
  auto mine = [&](const std::vector<v1::AuditEvent>& evs) {
    std::vector<v1::AuditEvent> out;
    for (auto& e : evs)
      if (e.action() == "loom.v1.HealthRequest" && e.reason() == reason && e.service() == "scheduler") out.push_back(e);
    return out;
  };
  // At once: the first denial, with its own request id; the rest only counted.
  std::vector<v1::AuditEvent> got;
  for (int i = 0; i < 100 && got.empty(); ++i) {
    got = mine(all_events(c));
    if (got.empty()) std::this_thread::sleep_for(50ms);
  }
  REQUIRE(got.size() == 1);
  CHECK(got[0].request_id() == rids.front());
  CHECK(got[0].decision() == v1::DENY);
  // When the 10 s window closes: one summary record counting the other 199.
  for (int i = 0; i < 300 && got.size() < 2; ++i) {
    std::this_thread::sleep_for(100ms);
    got = mine(all_events(c));
  }
  REQUIRE(got.size() == 2);
  CHECK(got[1].decision() == v1::DENY);
  CHECK(got[1].request_id().empty());
  CHECK(got[1].peer_key() == "client");
  auto j = nlohmann::json::parse(got[1].payload(), nullptr, false);
  REQUIRE_MESSAGE(!j.is_discarded(), got[1].payload());
  CHECK(j.value("merged_denials", 0) == 199);
  CHECK(j.value("first_request_id", "") == rids[1]);
  CHECK(j.value("last_request_id", "") == rids.back());
  // Every denial was still counted one by one in the metrics.
  auto text = http_get(c.ep("scheduler").metrics, "/metrics");
  CHECK(metric_sum(text, "loom_scheduler_denied_total") >= 200);
}

TEST_CASE("a token's tenant reaches the service logic and a token minted before tenants arrives as tenant default") {
  cluster c;
  REQUIRE(c.up);
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  auto tok = auth::issue_token(auth::claims{"acme-ci", auth::role::viewer, {"*"}, now + 600, 0, now, "acme"}, c.token_key);
  REQUIRE(tok.ok());
  auto p = ping_as(c, *tok);
  CHECK(p.principal() == "acme-ci");
  CHECK(p.role() == "viewer");
  CHECK(p.tenant() == "acme");

  auto old = ping_as(c, pre_tenant_token(c.token_key, "old-ops"));
  CHECK(old.principal() == "old-ops");
  CHECK(old.tenant() == "default");

  // Through the CLI, audited: --tenant is signed into the token.
  auto issued = run_loom(c.home.path(), {"token", "issue", "--role", "viewer", "--principal", "globex-bot", "--tenant",
                                         "globex", "--json"});
  REQUIRE_MESSAGE(issued.code == 0, issued.err);
  auto j = nlohmann::json::parse(issued.out);
  CHECK(j["tenant"] == "globex");
  CHECK(ping_as(c, j["token"].get<std::string>()).tenant() == "globex");
  auto plain = run_loom(c.home.path(), {"token", "issue", "--role", "viewer", "--offline", "--json"});
  REQUIRE(plain.code == 0);
  CHECK(ping_as(c, nlohmann::json::parse(plain.out)["token"].get<std::string>()).tenant() == "default");
}

TEST_CASE("a principal or tenant with a newline or space is refused online and offline, and no audit reason spans two lines") {
  cluster c;
  REQUIRE(c.up);
  struct attempt {
    std::vector<std::string> extra;
    std::string says;
  };
  const attempt attempts[] = {
      {{"--principal", "eve\n   42  2024-01-01T00:00:00Z  scheduler  admin/admin"}, "'\\x0a' at position 4"},
      {{"--principal", "bob smith"}, "' ' at position 4"},
      {{"--tenant", "acme\rcorp"}, "'\\x0d' at position 5"},
  };
  for (const auto& a : attempts) {
    for (bool offline : {false, true}) {
      std::vector<std::string> args = {"token", "issue", "--role", "admin"};
      args.insert(args.end(), a.extra.begin(), a.extra.end());
      if (offline) args.push_back("--offline");
      INFO(a.says << (offline ? " offline" : " online"));
      auto r = run_loom(c.home.path(), args);
      CHECK(r.code == 1);
      CHECK_MESSAGE(r.err.find(a.says) != std::string::npos, r.err);
      CHECK(r.out.empty());  // no token printed
    }
  }
  // The audit service checks what reaches it directly, too, and its error
  // record quotes the name escaped: no line of the audit log is forged.
  auto audit = c.client("audit");
  v1::IssueTokenRequest req;
  req.set_principal("mallory\n99 forged");
  req.set_role("admin");
  req.add_zones("*");
  req.set_ttl_s(60);
  const auto rid = wire::new_request_id();
  auto rep = send(*audit, req, c.admin(), rid);
  CHECK(rep.code == errc::invalid_argument);
  CHECK(rep.message.find("character '\\x0a' at position 8") != std::string::npos);
  auto evs = audit_events(c, rid);
  REQUIRE(evs.size() == 1);
  CHECK(evs[0].decision() == v1::ERROR);
  CHECK(evs[0].reason().find('\n') == std::string::npos);
  // A service's error quoting a request field (a node id) is stored on one line too.
  auto sched = c.client("scheduler");
  v1::DrainNodeRequest drain;
  drain.mutable_node()->set_value("evil\n   99  2024-01-01T00:00:00Z  scheduler  admin/admin");
  const auto drain_rid = wire::new_request_id();
  auto drained = send(*sched, drain, c.token(auth::role::operator_), drain_rid);
  CHECK(drained.code == errc::not_found);
  auto devs = audit_events(c, drain_rid);
  REQUIRE(devs.size() == 1);
  CHECK(devs[0].reason().find('\n') == std::string::npos);
  CHECK(devs[0].reason().find("no node evil\\x0a   99") != std::string::npos);
  for (auto& e : all_events(c)) CHECK(e.principal().find('\n') == std::string::npos);
}
