// Tenant walls in the audit trail and in TrainerStatus (issue 24 item 6, audit
// part), across processes on loopback: one `loom up`, tenants acme and globex
// each submit a job with their own operator token. `loom audit trail|tail`
// and queries by request id as acme's operator show acme's records only —
// its request records and its job's job.* events — never globex's (its job id
// finds nothing: not_found) nor records of no tenant (an anonymous caller's
// denial); an admin reads them all. Watermarks are the emitters'. While a job
// runs, TrainerStatus shows it to its tenant and admins, the phase alone to
// the other tenant.
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/loom_json.hpp"

#include "loom/v1/audit.pb.h"
#include "loom/v1/service.pb.h"
#include "loom/v1/trainer.pb.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <ctime>
#include <set>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

const char* corpus = "/usr/share/common-licenses/GPL-3";

std::string tenant_token(cluster& c, const std::string& principal, const std::string& tenant,
                         auth::role r = auth::role::operator_) {
  const auto now = static_cast<std::int64_t>(std::time(nullptr));
  auto t = auth::issue_token(auth::claims{principal, r, {"*"}, now + 900, 0, now, tenant}, c.token_key);
  REQUIRE(t.ok());
  return *t;
}

wire::reply call(wire::client& c, const google::protobuf::Message& m, const std::string& token,
                 const std::string& rid = wire::new_request_id()) {
  return send(c, m.GetDescriptor()->full_name(), m.SerializeAsString(), token, rid);
}

std::vector<v1::AuditEvent> query(cluster& c, const v1::AuditQueryRequest& q, const std::string& token) {
  auto cli = c.client("audit", 1, 10000ms);
  auto rep = call(*cli, q, token);
  REQUIRE_MESSAGE(rep.ok(), rep.message);
  v1::AuditQueryReply r;
  REQUIRE(r.ParseFromString(rep.body));
  return {r.events().begin(), r.events().end()};
}

// `loom audit ARGS --json --token T` (one JSON object a line): the events
// printed (a trail's "events", a tail's lines), or its error object.
std::vector<json> cli_events(cluster& c, std::vector<std::string> args, const std::string& token, int* code) {
  args.insert(args.end(), {"--json", "--token", token});
  auto r = run_loom(c.home.path(), args, 30s);
  *code = r.code;
  std::vector<json> out;
  std::size_t at = 0;
  while (at < r.out.size()) {
    auto eol = r.out.find('\n', at);
    auto line = r.out.substr(at, eol == std::string::npos ? std::string::npos : eol - at);
    at = eol == std::string::npos ? r.out.size() : eol + 1;
    auto j = json::parse(line, nullptr, false);
    if (j.is_discarded()) continue;
    if (j.contains("events"))
      for (auto& e : j["events"]) out.push_back(e);
    else if (j.contains("action"))
      out.push_back(j);
    else if (j.contains("error"))
      out.push_back(j);
  }
  return out;
}

}  // namespace

TEST_CASE("a tenant's operator reads only its tenant's audit records and sees another tenant's running job as a phase") {
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  const auto acme = tenant_token(c, "acme-ci", "acme");
  const auto globex = tenant_token(c, "globex-ci", "globex");
  auto submit = [&](const std::string& token, const std::string& rid) {
    auto j = loom_json(c.home.path(), {"job", "submit", "--template", "pipeline-test", "--set",
                                       std::string("text=") + corpus, "--request-id", rid, "--token", token});
    REQUIRE(j.contains("id"));
    return j["id"].get<std::string>();
  };
  const std::string acme_job = submit(acme, "acme-submit-1");
  const std::string globex_job = submit(globex, "globex-submit-1");
  // A record of no tenant: an anonymous caller's denial (admins only).
  auto trainer = c.client("trainer");
  const auto anon_rid = wire::new_request_id();
  CHECK(call(*trainer, v1::PingRequest{}, "", anon_rid).code == errc::unauthenticated);

  // While a job runs, TrainerStatus shows it whole to its tenant and the
  // admin, and only the phase to the other tenant.
  bool withheld_seen = false, own_seen = false;
  for (int i = 0; i < 600 && !(withheld_seen && own_seen); ++i) {
    auto as_admin = wire::call_typed<v1::TrainerStatusReply>(*trainer, v1::TrainerStatusRequest{}, c.admin());
    REQUIRE(as_admin.ok());
    const std::string running = as_admin->job().value();
    if (running == acme_job || running == globex_job) {
      const bool acme_runs = running == acme_job;
      auto owner = wire::call_typed<v1::TrainerStatusReply>(*trainer, v1::TrainerStatusRequest{}, acme_runs ? acme : globex);
      auto other = wire::call_typed<v1::TrainerStatusReply>(*trainer, v1::TrainerStatusRequest{}, acme_runs ? globex : acme);
      REQUIRE(owner.ok());
      REQUIRE(other.ok());
      // The trainer may have moved on between the calls: judged by what each answer says.
      if (other->job_withheld()) {
        CHECK(other->job().value().empty());
        CHECK(other->stage().empty());
        CHECK(other->checkpoint().empty());
        CHECK(other->step() == 0);
        CHECK_FALSE(other->state().empty());
        withheld_seen = true;
      } else {
        CHECK(other->job().value() != (acme_runs ? acme_job : globex_job));
      }
      if (!owner->job_withheld() && owner->job().value() == running) own_seen = true;
    }
    if (!(withheld_seen && own_seen)) std::this_thread::sleep_for(100ms);
  }
  CHECK(withheld_seen);
  CHECK(own_seen);

  // The admin's view has both jobs' events, each record naming its tenant.
  std::vector<v1::AuditEvent> all;
  for (int i = 0; i < 120; ++i) {
    all = all_events(c);
    int placed = 0;
    for (auto& e : all)
      if (e.action().starts_with("job.") && (e.job_id() == acme_job || e.job_id() == globex_job)) ++placed;
    if (placed >= 2) break;
    std::this_thread::sleep_for(500ms);
  }
  std::string acme_submit_rid, globex_submit_rid;
  bool acme_job_event = false;
  for (auto& e : all) {
    if (e.action() == "loom.v1.SubmitJobRequest" && e.job_id() == acme_job) {
      acme_submit_rid = e.request_id();
      CHECK(e.tenant() == "acme");
      CHECK(e.peer_key() == "client");
      CHECK(e.principal() == "acme-ci");
    }
    if (e.action() == "loom.v1.SubmitJobRequest" && e.job_id() == globex_job) {
      globex_submit_rid = e.request_id();
      CHECK(e.tenant() == "globex");
    }
    if (e.action().starts_with("job.") && e.job_id() == acme_job) {
      CHECK(e.tenant() == "acme");
      acme_job_event = true;
    }
    if (e.action().starts_with("job.") && e.job_id() == globex_job) CHECK(e.tenant() == "globex");
    if (e.request_id() == anon_rid) CHECK(e.tenant().empty());
  }
  REQUIRE_FALSE(acme_submit_rid.empty());
  REQUIRE_FALSE(globex_submit_rid.empty());
  CHECK(acme_job_event);

  // acme's trail of its own job: its records only, the job's events included.
  int code = -1;
  auto own = cli_events(c, {"audit", "trail", acme_job}, acme, &code);
  CHECK(code == 0);
  REQUIRE_FALSE(own.empty());
  std::set<std::string> actions;
  for (auto& e : own) {
    CHECK(e.value("tenant", "") == "acme");
    actions.insert(e.value("action", ""));
  }
  CHECK(actions.count("loom.v1.SubmitJobRequest") == 1);
  CHECK(std::any_of(actions.begin(), actions.end(), [](const std::string& a) { return a.starts_with("job."); }));
  // globex's job: nothing for acme (not_found), everything for the admin.
  auto theirs = cli_events(c, {"audit", "trail", globex_job}, acme, &code);
  CHECK(code != 0);
  REQUIRE(theirs.size() == 1);
  CHECK(theirs[0]["error"].value("code", "") == "not_found");
  auto admins = cli_events(c, {"audit", "trail", globex_job}, c.admin(), &code);
  CHECK(code == 0);
  CHECK_FALSE(admins.empty());
  // acme's tail: only acme's records; the admin's tail has the others too.
  auto tail = cli_events(c, {"audit", "tail", "--lines", "10000"}, acme, &code);
  CHECK(code == 0);
  CHECK_FALSE(tail.empty());
  for (auto& e : tail) {
    CHECK(e.value("tenant", "") == "acme");
    CHECK(e.value("job_id", "") != globex_job);
    CHECK(e.value("request_id", "") != anon_rid);
  }
  // By request id: globex's submit is not there for acme; acme's is; the admin sees both.
  v1::AuditQueryRequest by_rid;
  by_rid.set_request_id(globex_submit_rid);
  CHECK(query(c, by_rid, acme).empty());
  CHECK(query(c, by_rid, c.admin()).size() == 1);
  by_rid.set_request_id(acme_submit_rid);
  CHECK(query(c, by_rid, acme).size() == 1);
  by_rid.set_request_id(anon_rid);
  CHECK(query(c, by_rid, acme).empty());  // no tenant's: admins only
  CHECK(query(c, by_rid, c.admin()).size() == 1);

  // Watermarks are the emitters': acme's operator is refused, and the
  // refusal (answered by the audit service's logic) is audited under acme-ci.
  auto audit = c.client("audit");
  v1::AuditWatermarkRequest w;
  w.set_source("scheduler@x");
  const auto wm_rid = wire::new_request_id();
  auto wm = call(*audit, w, acme, wm_rid);
  CHECK(wm.code == errc::permission_denied);
  CHECK(call(*audit, w, c.admin()).code == errc::ok);
  by_rid.set_request_id(wm_rid);
  std::vector<v1::AuditEvent> wm_records;
  for (int i = 0; i < 80 && wm_records.empty(); ++i) {
    wm_records = query(c, by_rid, c.admin());
    if (wm_records.empty()) std::this_thread::sleep_for(250ms);
  }
  REQUIRE(wm_records.size() == 1);
  CHECK(wm_records[0].decision() == v1::DENY);
  CHECK(wm_records[0].principal() == "acme-ci");
  CHECK(wm_records[0].peer_key() == "client");
  CHECK(wm_records[0].tenant() == "acme");
  CHECK(wm_records[0].reason() == wm.message);
  CHECK(query(c, by_rid, acme).size() == 1);  // its own denial is in its own trail

  // The chain still verifies with the tenants in it.
  auto verify = run_loom(c.home.path(), {"audit", "verify"}, 60s);
  CHECK_MESSAGE(verify.code == 0, verify.out << verify.err);
}
