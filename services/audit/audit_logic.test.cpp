// The audit logic's handler table (its requests, an unknown type and a bad
// body refused precisely) and its handlers over a real audit log on SQLite:
// watermarks, queries with payloads decrypted, token issue and its audit payload.
#include "services/audit/audit_logic.hpp"

#include "libs/auth/token.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/schema.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::audit_service;

namespace {

runtime::call_context admin() {
  runtime::call_context ctx;
  ctx.principal = "root";
  ctx.role = "admin";
  return ctx;
}

runtime::call_context as(std::string principal, std::string role, std::string tenant, std::string peer) {
  runtime::call_context ctx;
  ctx.principal = std::move(principal);
  ctx.role = std::move(role);
  ctx.tenant = std::move(tenant);
  ctx.peer = std::move(peer);
  return ctx;
}

runtime::handled call(audit_logic& logic, const google::protobuf::Message& m,
                      const runtime::call_context& ctx = admin()) {
  return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
}

std::string event(const std::string& source, std::uint64_t seq, const std::string& payload,
                  const std::string& tenant = "", const std::string& job = "") {
  v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_action("loom.v1.DrainNodeRequest");
  e.set_decision(v1::ALLOW);
  e.set_payload(payload);
  e.set_tenant(tenant);
  e.set_job_id(job);
  return e.SerializeAsString();
}

// An audit log on SQLite in `dir`, migrated, with `events` stored.
std::shared_ptr<audit_log> log_with(const files::temp_dir& dir, const std::vector<std::string>& events) {
  const std::string url = dir.path() + "/loom.db";
  {
    auto db = store::database::open(url);
    REQUIRE(db.ok());
    REQUIRE(store::migrate(**db, audit_migrations()).ok());
  }
  audit_log_options o;
  o.url = url;
  o.keys_dir = dir.path() + "/keys";
  o.anchor_path = dir.path() + "/anchors.log";
  auto opened = audit_log::open(std::move(o));
  REQUIRE_MESSAGE(opened.ok(), opened.err().to_string());
  std::shared_ptr<audit_log> log = std::move(*opened);
  auto stored = log->append_batch(events);
  REQUIRE(stored.ok());
  CHECK(stored->stored == events.size());
  return log;
}

std::vector<std::string> payloads(audit_logic& logic, const v1::AuditQueryRequest& q, const runtime::call_context& ctx) {
  auto h = call(logic, q, ctx);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto rep = runtime::parse_as<v1::AuditQueryReply>(h.body);
  REQUIRE(rep.ok());
  std::vector<std::string> out;
  for (const auto& e : rep->events()) out.push_back(e.payload());
  return out;
}

}  // namespace

TEST_CASE("the audit logic answers its four requests and refuses an unknown type naming the service") {
  files::temp_dir dir("audit-logic");
  audit_logic logic(nullptr, nullptr, layout::paths{dir.path()});
  auto unknown = logic.handle("loom.v1.SubmitJobRequest", "", admin());
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "audit does not handle loom.v1.SubmitJobRequest");
  for (const char* type : {"loom.v1.AuditWatermarkRequest", "loom.v1.AuditQueryRequest", "loom.v1.RotateKeysRequest",
                           "loom.v1.IssueTokenRequest"}) {
    auto bad = logic.handle(type, "\xff\xff\xff", admin());
    CHECK(bad.code == errc::invalid_argument);
    CHECK(bad.message == std::string("body is not a valid ") + type);
  }
}

TEST_CASE("a token issued through the audit logic carries what was asked, and its audit payload never the token") {
  files::temp_dir dir("audit-logic");
  const layout::paths paths{dir.path()};
  REQUIRE(auth::create_token_key(paths.token_key()).ok());
  audit_logic logic(nullptr, nullptr, paths);
  v1::IssueTokenRequest q;
  q.set_principal("alice");
  q.set_role("operator");
  q.add_zones("local");
  q.set_ttl_s(60);
  q.set_tenant("acme");
  auto h = call(logic, q);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto rep = runtime::parse_as<v1::IssueTokenReply>(h.body);
  REQUIRE(rep.ok());
  CHECK(rep->principal() == "alice");
  CHECK(rep->role() == "operator");
  CHECK(rep->zones_size() == 1);
  CHECK(rep->tenant() == "acme");
  auto claims = auth::verify_token(rep->token(), *auth::load_token_key(paths.token_key()), {rep->expires_unix_s() - 1});
  REQUIRE(claims.ok());
  CHECK(claims->principal == "alice");
  CHECK(h.audit_payload.find("\"principal\":\"alice\"") != std::string::npos);
  CHECK(h.audit_payload.find(rep->token()) == std::string::npos);

  q.set_role("boss");
  auto bad = call(logic, q);
  CHECK(bad.code == errc::invalid_argument);
  CHECK(bad.message == "role 'boss' is not viewer, operator or admin");
  q.set_role("viewer");
  q.clear_zones();
  CHECK(call(logic, q).message == "a token needs at least one zone ('*' for all)");
}

TEST_CASE("watermarks and queries through the audit logic come from the log, payloads decrypted") {
  files::temp_dir dir("audit-logic");
  const std::string url = dir.path() + "/loom.db";
  {
    auto db = store::database::open(url);
    REQUIRE(db.ok());
    REQUIRE(store::migrate(**db, audit_migrations()).ok());
  }
  audit_log_options o;
  o.url = url;
  o.keys_dir = dir.path() + "/keys";
  o.anchor_path = dir.path() + "/anchors.log";
  auto opened = audit_log::open(std::move(o));
  REQUIRE_MESSAGE(opened.ok(), opened.err().to_string());
  std::shared_ptr<audit_log> log = std::move(*opened);
  auto stored = log->append_batch(std::vector<std::string>{event("ingest@h", 1, "one"), event("ingest@h", 2, "two"),
                                                           event("ingest@h", 4, "gap")});
  REQUIRE(stored.ok());
  CHECK(stored->stored == 2);
  auto db = store::database::open(url);
  REQUIRE(db.ok());
  audit_logic logic(log, db->get(), layout::paths{dir.path()});

  v1::AuditWatermarkRequest w;
  w.set_source("ingest@h");
  auto wm = runtime::parse_as<v1::AuditWatermarkReply>(call(logic, w).body);
  REQUIRE(wm.ok());
  CHECK(wm->stored_seq() == 2);

  v1::AuditQueryRequest q;
  q.set_source("ingest@h");
  q.set_after_seq(1);
  auto h = call(logic, q);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto rep = runtime::parse_as<v1::AuditQueryReply>(h.body);
  REQUIRE(rep.ok());
  REQUIRE(rep->events_size() == 1);
  CHECK(rep->events(0).seq() == 2);
  CHECK(rep->events(0).source_seq() == 2);
  CHECK(rep->events(0).payload() == "two");
  CHECK(rep->events(0).payload_state().empty());
  CHECK(rep->events(0).decision() == v1::ALLOW);
  CHECK(rep->total() == 2);
}

TEST_CASE("a tenant reads only its own tenant's audit records, an admin every record") {
  files::temp_dir dir("audit-logic");
  auto log = log_with(dir, {event("scheduler@h", 1, "acme-submit", "acme", "job-000001"),
                            event("scheduler@h", 2, "globex-submit", "globex", "job-000002"),
                            event("scheduler@h", 3, "lifecycle", ""),  // no tenant's: admins only
                            event("scheduler@h", 4, "acme-event", "acme", "job-000001")});
  auto db = store::database::open(dir.path() + "/loom.db");
  REQUIRE(db.ok());
  audit_logic logic(log, db->get(), layout::paths{dir.path()});
  const auto acme = as("ci", "operator", "acme", "client");
  v1::AuditQueryRequest all;
  CHECK(payloads(logic, all, acme) == std::vector<std::string>{"acme-submit", "acme-event"});
  CHECK(payloads(logic, all, admin()).size() == 4);
  v1::AuditQueryRequest tail;  // loom audit tail
  tail.set_newest(true);
  tail.set_limit(10);
  CHECK(payloads(logic, tail, as("g", "operator", "globex", "client")) == std::vector<std::string>{"globex-submit"});
  v1::AuditQueryRequest trail;  // loom audit trail of another tenant's job: nothing
  trail.set_job_id("job-000002");
  CHECK(payloads(logic, trail, acme).empty());
  CHECK(payloads(logic, trail, admin()) == std::vector<std::string>{"globex-submit"});
  trail.set_job_id("job-000001");
  CHECK(payloads(logic, trail, acme).size() == 2);
  // A viewer's token of the default tenant sees no record of no tenant.
  CHECK(payloads(logic, all, as("v", "operator", "default", "client")).empty());
}

TEST_CASE("watermarks answer the emitters and admins only") {
  files::temp_dir dir("audit-logic");
  auto log = log_with(dir, {event("ingest@h", 1, "one")});
  auto db = store::database::open(dir.path() + "/loom.db");
  REQUIRE(db.ok());
  audit_logic logic(log, db->get(), layout::paths{dir.path()});
  v1::AuditWatermarkRequest w;
  w.set_source("ingest@h");
  CHECK(call(logic, w, as("svc:ingest", "operator", "default", "ingest")).code == errc::ok);  // an emitter
  CHECK(call(logic, w, as("svc:cli", "operator", "default", "client")).code == errc::ok);     // the CLI's spool
  CHECK(call(logic, w, as("root", "admin", "default", "client")).code == errc::ok);
  auto denied = call(logic, w, as("ci", "operator", "acme", "client"));
  CHECK(denied.code == errc::permission_denied);
  CHECK(denied.message.find("for the audit emitters") != std::string::npos);
  CHECK(call(logic, w, as("site:north", "operator", "default", "site:north:audit")).code == errc::permission_denied);
}

TEST_CASE("no token is issued for a site's, a service's or the enrolment socket's principal") {
  files::temp_dir dir("audit-logic");
  const layout::paths paths{dir.path()};
  REQUIRE(auth::create_token_key(paths.token_key()).ok());
  audit_logic logic(nullptr, nullptr, paths);
  for (const char* reserved : {"site:north", "svc:scheduler", "unenrolled"}) {
    v1::IssueTokenRequest q;
    q.set_principal(reserved);
    q.set_role("operator");
    q.add_zones("*");
    q.set_ttl_s(60);
    auto h = call(logic, q);
    CHECK(h.code == errc::permission_denied);
    CHECK_MESSAGE(h.message.find("is reserved") != std::string::npos, h.message);
    CHECK(h.body.empty());
  }
}
