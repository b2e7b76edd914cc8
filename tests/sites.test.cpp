// Edge sites joining a cloud instance, across processes on loopback (issue 15
// item 1): a cloud `loom up` (data dir A), `loom site token`, `loom site
// enrol` from separate site data dirs (B, C: not running, their keys made by
// the enrolment), `loom site list`, `loom site revoke`. Every refused
// enrolment (a reused token, a token of another site, an expired token, a
// revoked site) exits 3 naming why and is in the cloud's audit log as
// site.enrol.refused; no refusal is the usage exit 2, which only a malformed
// option gets. The cloud's services admit an enrolled site's keys
// within about a second and refuse them after a revocation, on connections
// made before it too.
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"

#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"
#include "loom/v1/service.pb.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

json parse_out(const run_result& r) {
  auto j = json::parse(r.out, nullptr, false);
  REQUIRE_MESSAGE(j.is_object(), "stdout: " << r.out << "\nstderr: " << r.err);
  return j;
}

// `loom site token --site S [--ttl T]` on the cloud: {token, cloud endpoint}.
std::pair<std::string, std::string> site_token(cluster& a, const std::string& site, const std::string& ttl = "") {
  std::vector<std::string> args{"site", "token", "--site", site, "--json"};
  if (!ttl.empty()) args.insert(args.end(), {"--ttl", ttl});
  auto r = run_loom(a.home.path(), args, 30s);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  auto j = parse_out(r);
  return {j.value("token", ""), j.value("cloud", "")};
}

run_result enrol(const std::string& dir, const std::string& site, const std::string& cloud, const std::string& token) {
  return run_loom(dir, {"site", "enrol", "--site", site, "--cloud", cloud, "--enrol-token", token, "--json"}, 30s);
}

json site_list(cluster& a) {
  auto r = run_loom(a.home.path(), {"site", "list", "--json"}, 30s);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  return parse_out(r);
}

// The cloud's audit events with `action`, once at least `n` are stored (or 20 s).
std::vector<v1::AuditEvent> events_named(cluster& a, const std::string& action, std::size_t n) {
  std::vector<v1::AuditEvent> out;
  for (int round = 0; round < 40; ++round) {
    out.clear();
    for (auto& e : all_events(a))
      if (e.action() == action) out.push_back(e);
    if (out.size() >= n) break;
    std::this_thread::sleep_for(500ms);
  }
  return out;
}

// One Ping to `service` of the cloud, presenting `mine`, with a viewer token.
errc ping(cluster& a, wire::client& cli) {
  v1::PingRequest p;
  p.set_payload("site");
  wire::request req{wire::new_request_id(), "loom.v1.PingRequest", p.SerializeAsString(),
                    a.token(auth::role::viewer, {"local"})};
  auto r = cli.call(req);
  return r ? r->code : r.code();
}

std::unique_ptr<wire::client> client_as(cluster& a, const std::string& service, const wire::curve_keypair& mine,
                                        std::chrono::milliseconds timeout) {
  auto server = wire::load_public_key(a.paths.curve_dir(), service);
  REQUIRE(server.ok());
  return std::make_unique<wire::client>(a.ctx, a.ep(service).rpc, *server, mine, wire::client_options{timeout, 0});
}

// Polls `f` until it returns `want` (or `within` passes); returns the last answer.
template <class F>
errc until(errc want, std::chrono::milliseconds within, F f) {
  errc got = f();
  for (auto end = std::chrono::steady_clock::now() + within; got != want && std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(200ms);
    got = f();
  }
  return got;
}

}  // namespace

TEST_CASE("a site enrols once with its token and shows in site list, and reused, foreign, expired and revoked enrolments are refused and audited") {
  cluster a;
  REQUIRE(a.up);
  temp_dir b("loom-site-b"), c("loom-site-c");

  auto [t1, cloud] = site_token(a, "plant-a");
  CHECK(t1.starts_with("lse1."));
  CHECK(cloud == a.ep("scheduler").rpc);
  auto r = enrol(b.path(), "plant-a", cloud, t1);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  auto j = parse_out(r);
  CHECK(j.value("site", "") == "plant-a");
  CHECK(j.value("cloud_zone", "") == "local");
  // The site keeps the cloud's keys and endpoints; the cloud keeps the site's keys.
  const layout::paths bp{b.path()};
  CHECK(wire::load_public_key(bp.cloud_keys_dir(), "scheduler").value() ==
        wire::load_public_key(a.paths.curve_dir(), "scheduler").value());
  auto cloud_json = json::parse(files::read_file(bp.cloud()).value());
  CHECK(cloud_json["services"]["audit"].value("pull", "") == a.ep("audit").pull);
  auto sites = site_list(a)["sites"];
  REQUIRE(sites.size() == 1);
  CHECK(sites[0].value("name", "") == "plant-a");
  CHECK(sites[0].value("state", "") == "enrolled");
  CHECK(sites[0]["public_keys"].value("trainer", "") == wire::load_public_key(bp.curve_dir(), "trainer").value());
  CHECK(sites[0]["trainers"].empty());
  CHECK(sites[0]["link"].is_null());
  CHECK(sites[0]["datasets"].is_null());
  CHECK(sites[0].value("last_contact_unix_ns", std::uint64_t{0}) > 0);
  auto text = run_loom(a.home.path(), {"site", "list"}, 30s);
  CHECK(text.out.find("plant-a") != std::string::npos);
  CHECK(text.out.find("enrolled") != std::string::npos);

  struct refusal {
    std::string dir, site, token, why;
  };
  std::vector<refusal> refusals;
  auto refuse = [&](const refusal& f) {
    refusals.push_back(f);
    auto e = enrol(f.dir, f.site, cloud, f.token);  // --json: the error is on stdout
    INFO(f.site << ": " << e.out << e.err);
    CHECK(e.code == 3);
    CHECK(parse_out(e)["error"].value("code", "") == "permission_denied");
    CHECK(e.out.find(f.why) != std::string::npos);
  };
  refuse({c.path(), "plant-a", t1, "used already"});  // another box, the same token
  refuse({c.path(), "plant-c", site_token(a, "plant-b").first, "not for site plant-c"});
  const auto short_lived = site_token(a, "plant-d", "1").first;
  const auto spare = site_token(a, "plant-a").first;  // issued before the revocation
  auto rv = run_loom(a.home.path(), {"site", "revoke", "plant-a", "--reason", "box stolen"}, 30s);
  REQUIRE_MESSAGE(rv.code == 0, rv.err);
  std::this_thread::sleep_for(1100ms);  // past short_lived's second
  refuse({c.path(), "plant-d", short_lived, "expired"});
  refuse({b.path(), "plant-a", spare, "revoked"});
  // A viewer may list sites but not mint tokens.
  auto viewer = run_loom(a.home.path(), {"site", "token", "--site", "plant-e", "--token",
                                         a.token(auth::role::viewer, {"local"})}, 30s);
  CHECK(viewer.code == 3);
  auto listed = site_list(a)["sites"];
  REQUIRE(listed.size() == 3);  // plant-a (revoked), plant-b, plant-d (pending): plant-c never existed
  CHECK(listed[0].value("state", "") == "revoked");
  CHECK(listed[1].value("state", "") == "pending");

  CHECK(events_named(a, "site.token", 4).size() == 4);
  auto ok = events_named(a, "site.enrol", 1);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].decision() == v1::ALLOW);
  CHECK(ok[0].principal() == "site:plant-a");
  auto refused = events_named(a, "site.enrol.refused", refusals.size());
  REQUIRE(refused.size() == refusals.size());
  for (std::size_t i = 0; i < refusals.size(); ++i) {
    INFO(refused[i].reason());
    CHECK(refused[i].decision() == v1::DENY);
    CHECK(refused[i].reason().find(refusals[i].why) != std::string::npos);
  }
  auto revoked = events_named(a, "site.revoke", 1);
  REQUIRE(revoked.size() == 1);
  CHECK(revoked[0].reason() == "box stolen");
  // No enrolment token is ever in the cloud's audit log.
  for (auto& e : all_events(a)) CHECK(e.payload().find(t1.substr(5, 32)) == std::string::npos);
}

TEST_CASE("the cloud's services admit an enrolled site's keys and refuse them once it is revoked, open connections included") {
  cluster a;
  REQUIRE(a.up);
  temp_dir b("loom-site-b");
  auto [token, cloud] = site_token(a, "plant-a");
  // Before enrolment: the site's key is unknown to ingest (allow-list only) and,
  // at the scheduler, may send nothing but an enrolment.
  const auto stranger = wire::generate_keypair();
  CHECK(ping(a, *client_as(a, "ingest", stranger, 500ms)) == errc::unavailable);
  CHECK(ping(a, *client_as(a, "scheduler", stranger, 2000ms)) == errc::permission_denied);

  auto r = enrol(b.path(), "plant-a", cloud, token);
  REQUIRE_MESSAGE(r.code == 0, r.err);
  const auto site_client = wire::load_keypair(layout::paths{b.path()}.curve_dir(), "client").value();
  auto held = client_as(a, "ingest", site_client, 1000ms);
  CHECK(until(errc::ok, 5s, [&] { return ping(a, *held); }) == errc::ok);
  CHECK(ping(a, *client_as(a, "scheduler", site_client, 2000ms)) == errc::ok);

  auto rv = run_loom(a.home.path(), {"site", "revoke", "plant-a"}, 30s);
  REQUIRE_MESSAGE(rv.code == 0, rv.err);
  // The connection made before the revocation is refused by the gateway...
  CHECK(until(errc::permission_denied, 5s, [&] { return ping(a, *held); }) == errc::permission_denied);
  // ...and a new one by ZAP.
  CHECK(ping(a, *client_as(a, "ingest", site_client, 500ms)) == errc::unavailable);
  bool denial_recorded = false;
  for (int i = 0; i < 40 && !denial_recorded; ++i) {
    for (auto& e : all_events(a))
      denial_recorded |= e.decision() == v1::DENY && e.peer_key() == "site:plant-a:client" &&
                         e.reason().find("no longer admitted") != std::string::npos;
    if (!denial_recorded) std::this_thread::sleep_for(500ms);
  }
  CHECK(denial_recorded);
}

TEST_CASE("a refused enrolment exits with the cloud's code and reason, never the usage exit 2, and only a malformed option is a usage error") {
  namespace fs = std::filesystem;
  cluster a;
  REQUIRE(a.up);
  temp_dir b("loom-site-b"), c("loom-site-c"), d("loom-site-d");
  auto [t1, cloud] = site_token(a, "plant-a");
  REQUIRE(enrol(b.path(), "plant-a", cloud, t1).code == 0);
  auto no_usage = [](const run_result& r) {
    return r.err.rfind("error: ", 0) == 0 && r.err.find("loom site enrol:") == std::string::npos &&
           r.err.find("loom up:") == std::string::npos;
  };

  // The used token again, from the data dir it enrolled: refused by the cloud, exit 3.
  auto used = run_loom(b.path(), {"site", "enrol", "--site", "plant-a", "--cloud", cloud, "--enrol-token", t1}, 30s);
  INFO("used: " << used.out << used.err);
  CHECK(used.code == 3);
  CHECK(used.err.find("used already") != std::string::npos);
  CHECK(no_usage(used));
  // Another site's keys (plant-a's, copied) under a new name and a fresh token: the cloud refuses them; not exit 2.
  fs::create_directories(c.path() + "/keys");
  fs::copy(b.path() + "/keys/curve", c.path() + "/keys/curve", fs::copy_options::recursive);
  const auto t2 = site_token(a, "plant-z").first;
  auto taken = run_loom(c.path(), {"site", "enrol", "--site", "plant-z", "--cloud", cloud, "--enrol-token", t2}, 30s);
  INFO("taken: " << taken.out << taken.err);
  CHECK(taken.code != 2);
  CHECK(taken.code != 0);
  CHECK(taken.err.find("already enrolled by site plant-a") != std::string::npos);
  CHECK(no_usage(taken));
  // Through `loom up --site`: the cloud's refusal is not a usage error either, and nothing starts.
  auto up = run_loom(d.path(), {"up", "--site", "plant-y", "--cloud", cloud, "--enrol-token", t1}, 60s);
  INFO("up: " << up.out << up.err);
  CHECK(up.code == 3);
  CHECK(no_usage(up));
  CHECK(processes_of(d.path()).empty());
  // A malformed option is the command line's: exit 2, nothing sent.
  auto bad = run_loom(c.path(), {"site", "enrol", "--site", "plant-z", "--cloud", cloud, "--enrol-token", "lse1.x"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("loom site enrol: --enrol-token") != std::string::npos);
  auto bad_up = run_loom(d.path(), {"up", "--site", "plant-y", "--cloud", "udp://x", "--enrol-token", t2});
  CHECK(bad_up.code == 2);
  CHECK(bad_up.err.find("loom up: --cloud udp://x") != std::string::npos);
  // The cloud's refusals are in its audit log (the malformed ones never reached it).
  CHECK(events_named(a, "site.enrol.refused", 2).size() >= 2);
}
