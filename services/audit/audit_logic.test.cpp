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

runtime::handled call(audit_logic& logic, const google::protobuf::Message& m) {
  return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), admin());
}

std::string event(const std::string& source, std::uint64_t seq, const std::string& payload) {
  v1::AuditEvent e;
  e.set_source(source);
  e.set_source_seq(seq);
  e.set_action("loom.v1.DrainNodeRequest");
  e.set_decision(v1::ALLOW);
  e.set_payload(payload);
  return e.SerializeAsString();
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
