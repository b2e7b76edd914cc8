// Cross-process: the web console (issue 29) in front of a real `loom up`:
// TLS 1.3 only, its headers, log-in with a token into a HttpOnly, Secure,
// SameSite=Strict cookie, and what it refuses — a viewer's state-changing
// calls (refused by the services themselves and audited there), missing or
// forged cookies, another session's CSRF token, another origin, another
// tenant's objects — and the live stream's delay after a change.
#include "libs/auth/token.hpp"
#include "tests/support/audit_events.hpp"
#include "tests/support/console_client.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <set>
#include <thread>

using namespace loom::test;
using namespace std::chrono_literals;
using nlohmann::json;

namespace {

std::string tenant_token(const cluster& c, loom::auth::role r, const std::string& principal, const std::string& tenant) {
  const auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto e = loom::auth::read_epoch(c.paths.epoch());
  loom::auth::claims cl{principal, r, {"*"}, now + 600, e ? *e : 0, now, tenant};
  auto t = loom::auth::issue_token(cl, c.token_key);
  REQUIRE(t);
  return *t;
}

// Audit events matching `pred`, waiting up to 30 s for at least `n`.
template <class Pred>
std::vector<loom::v1::AuditEvent> wait_audit(cluster& c, std::size_t n, Pred pred) {
  std::vector<loom::v1::AuditEvent> got;
  for (auto until = std::chrono::steady_clock::now() + 30s; std::chrono::steady_clock::now() < until;) {
    got.clear();
    for (auto& e : all_events(c))
      if (pred(e)) got.push_back(e);
    if (got.size() >= n) break;
    std::this_thread::sleep_for(200ms);
  }
  return got;
}

const char* corpus = "/usr/share/common-licenses/GPL-3";

}  // namespace

TEST_CASE("the console speaks TLS 1.3 only, sends a strict CSP and logs a token in to a HttpOnly Secure SameSite cookie") {
  cluster c;
  REQUIRE(c.up);
  const int port = console_port(c);
  CHECK_FALSE(tls_handshake(port, TLS1_VERSION, TLS1_2_VERSION));  // a TLS 1.2 client is refused
  CHECK(tls_handshake(port, TLS1_3_VERSION, TLS1_3_VERSION));

  console_session anon;
  anon.port = port;
  anon.ca = console_cert(c);
  auto cli = anon.client();  // verifies the console's certificate for 127.0.0.1
  auto page = cli->Get("/");
  REQUIRE(page);
  CHECK(page->status == 200);
  const auto csp = page->get_header_value("Content-Security-Policy");
  CHECK(csp.find("default-src 'none'") != std::string::npos);
  CHECK(csp.find("script-src 'self'") != std::string::npos);
  CHECK(csp.find("frame-ancestors 'none'") != std::string::npos);
  CHECK(csp.find("unsafe") == std::string::npos);
  CHECK(csp.find("http") == std::string::npos);  // no other origin is named
  CHECK(page->get_header_value("X-Content-Type-Options") == "nosniff");
  CHECK(page->body.find("//") == std::string::npos);  // nothing loaded from elsewhere

  // Not logged in: the session says so, every API call is refused.
  auto [st0, s0] = anon.get("/api/session");
  CHECK(st0 == 200);
  CHECK(s0.value("logged_in", true) == false);
  CHECK(anon.get("/api/jobs").first == 401);

  int status = 0;
  console_login(c, "lt1.forged.token", &status);
  CHECK(status == 401);
  console_login(c, c.token(loom::auth::role::admin, {"*"}, -10), &status);  // expired
  CHECK(status == 401);

  std::string set_cookie;
  auto admin = console_login(c, c.admin(), &status, &set_cookie);
  REQUIRE(status == 200);
  CHECK(set_cookie.rfind("__Host-loom_session=", 0) == 0);
  CHECK(set_cookie.find("; HttpOnly") != std::string::npos);
  CHECK(set_cookie.find("; Secure") != std::string::npos);
  CHECK(set_cookie.find("; SameSite=Strict") != std::string::npos);
  CHECK(set_cookie.find("; Path=/") != std::string::npos);
  auto [st1, who] = admin.get("/api/session");
  CHECK(st1 == 200);
  CHECK(who["role"] == "admin");
  CHECK(who["csrf"] == admin.csrf);
  auto [st2, topo] = admin.get("/api/topology");
  CHECK(st2 == 200);
  CHECK(topo["cloud"]["aggregator"] == true);
  CHECK(topo["cloud"]["trainers"].size() == 1);

  CHECK(admin.post("/api/logout").first == 200);
  CHECK(admin.get("/api/jobs").first == 401);  // the cookie names no session any more

  // The refused log-ins are in the audit chain.
  auto denied = wait_audit(c, 2, [](const auto& e) {
    return e.action() == "console.login" && e.decision() == loom::v1::DENY;
  });
  CHECK(denied.size() >= 2);
}

TEST_CASE("a viewer's console session reads but every state-changing call is refused by the service and audited") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  auto op = console_login(c, tenant_token(c, loom::auth::role::operator_, "op-a", "A"));
  auto view = console_login(c, tenant_token(c, loom::auth::role::viewer, "view-a", "A"));
  REQUIRE(!op.cookie.empty());
  REQUIRE(!view.cookie.empty());

  auto [sst, sub] = op.post("/api/jobs", {{"template", "pipeline-test"}, {"overrides", {std::string("text=") + corpus}}});
  REQUIRE_MESSAGE(sst == 200, sub.dump());
  const std::string job = sub["job"]["id"];

  auto [lst, list] = view.get("/api/jobs");
  CHECK(lst == 200);
  bool listed = false;
  for (const auto& j : list["jobs"]) listed = listed || j["id"] == job;
  CHECK(listed);
  CHECK(view.get("/api/jobs/" + job).first == 200);
  auto [nst, nodes] = view.get("/api/nodes");
  REQUIRE(nst == 200);
  std::string trainer;
  for (const auto& n : nodes["nodes"])
    if (n["service"] == "trainer") trainer = n["node"]["value"];
  REQUIRE(!trainer.empty());

  // Every state-changing control, sent by the viewer's browser with a valid
  // session and CSRF token: the services refuse each.
  const std::vector<std::pair<std::string, json>> calls = {
      {"/api/jobs", {{"template", "pipeline-test"}, {"overrides", {std::string("text=") + corpus}}}},
      {"/api/jobs/" + job + "/cancel", json::object()},
      {"/api/nodes/" + trainer + "/drain", json::object()},
      {"/api/nodes/" + trainer + "/undrain", json::object()},
      {"/api/sites/token", {{"site", "north"}}},
      {"/api/sites/north/revoke", json::object()},
      {"/api/models/mv-000001/export", {{"format", "hf"}}},
      {"/api/datasets", {{"path", corpus}, {"dataset", "viewer-text"}}},
      {"/api/datasets/a-text/verify", json::object()}};
  for (const auto& [path, body] : calls) {
    auto [st, rep] = view.post(path, body);
    INFO(path << " -> " << rep.dump());
    CHECK(st == 403);
    CHECK(rep["error"]["code"] == "permission_denied");
  }
  const std::set<std::string> want = {"loom.v1.SubmitJobRequest",      "loom.v1.CancelJobRequest",
                                      "loom.v1.DrainNodeRequest",      "loom.v1.UndrainNodeRequest",
                                      "loom.v1.IssueSiteTokenRequest", "loom.v1.RevokeSiteRequest",
                                      "loom.v1.StartModelExportRequest", "loom.v1.ImportDatasetRequest",
                                      "loom.v1.VerifyDatasetRequest"};
  auto denials = wait_audit(c, want.size(), [&](const auto& e) {
    return e.principal() == "view-a" && e.decision() == loom::v1::DENY && want.count(e.action());
  });
  std::set<std::string> seen;
  for (const auto& e : denials) {
    seen.insert(e.action());
    CHECK(e.peer_key() == "client");  // the console sent it with the client key, as the CLI does
  }
  CHECK(seen == want);
  // The job is still there, untouched by the viewer; its operator cancels it.
  CHECK(op.post("/api/jobs/" + job + "/cancel").first == 200);
}

TEST_CASE("missing or forged cookies, another session's CSRF token, another origin and another tenant are refused") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  auto a = console_login(c, tenant_token(c, loom::auth::role::operator_, "op-a", "A"));
  auto a2 = console_login(c, tenant_token(c, loom::auth::role::operator_, "op-a", "A"));
  auto b = console_login(c, tenant_token(c, loom::auth::role::operator_, "op-b", "B"));
  REQUIRE(!a.cookie.empty());
  REQUIRE(!b.cookie.empty());
  CHECK(a.cookie != a2.cookie);
  CHECK(a.csrf != a2.csrf);
  auto [sst, sub] = a.post("/api/jobs", {{"template", "pipeline-test"}, {"overrides", {std::string("text=") + corpus}}});
  REQUIRE_MESSAGE(sst == 200, sub.dump());
  const std::string job = sub["job"]["id"];

  console_session none = a;
  none.cookie.clear();
  CHECK(none.get("/api/jobs").first == 401);
  CHECK(none.post("/api/jobs/" + job + "/cancel").first == 401);
  console_session forged = a;
  forged.cookie = "__Host-loom_session=" + std::string(64, 'a');
  CHECK(forged.get("/api/jobs").first == 401);
  CHECK(forged.post("/api/jobs/" + job + "/cancel").first == 401);

  console_session wrong_csrf = a;
  wrong_csrf.csrf = a2.csrf;  // the same principal's other session
  auto [cst, crep] = wrong_csrf.post("/api/jobs/" + job + "/cancel");
  CHECK(cst == 403);
  CHECK(crep["error"]["message"].get<std::string>().find("CSRF") != std::string::npos);
  CHECK(a.post("/api/jobs/" + job + "/cancel", json::object(), {}, false).first == 403);  // none at all
  CHECK(a.post("/api/jobs/" + job + "/cancel", json::object(), {{"Origin", "https://evil.example"}}).first == 403);
  CHECK(a.post("/api/jobs/" + job + "/cancel", json::object(), {{"Sec-Fetch-Site", "cross-site"}}).first == 403);
  CHECK(a.get("/api/jobs/" + job).second["job"]["state"] != "cancelled");  // none of them reached the scheduler

  // Tenant B does not see A's job, and cannot cancel it.
  CHECK(b.get("/api/jobs/" + job).first == 404);
  auto [bl, blist] = b.get("/api/jobs");
  CHECK(bl == 200);
  for (const auto& j : blist["jobs"]) CHECK(j["id"] != job);
  CHECK(b.post("/api/jobs/" + job + "/cancel").first == 404);

  // A malformed body is a clear error, and the console keeps serving.
  auto [mst, mrep] = a.post("/api/jobs", {{"template", "../../etc/passwd"}});
  CHECK(mst == 400);
  CHECK(mrep["error"]["message"].get<std::string>().find("template") != std::string::npos);
  CHECK(a.post("/api/jobs/" + job + "/cancel").first == 200);
}

TEST_CASE("the console's live stream shows a change to the topology within a second") {
  cluster c;
  REQUIRE(c.up);
  auto admin = console_login(c, c.admin());
  REQUIRE(!admin.cookie.empty());
  event_stream events(admin);
  REQUIRE(events.wait_for("event: topology", 10s));
  // A new site (its enrolment token issued) is a change of the topology.
  const auto t0 = std::chrono::steady_clock::now();
  auto [st, rep] = admin.post("/api/sites/token", {{"site", "north"}});
  REQUIRE_MESSAGE(st == 200, rep.dump());
  const bool shown = events.wait_for("\"name\":\"north\"", 10s);
  const auto ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  admin.post("/api/logout");  // ends the stream within one tick
  events.stop();
  MESSAGE("topology update after " << ms << " ms");
  CHECK(shown);
  CHECK(ms < 1000);
}
