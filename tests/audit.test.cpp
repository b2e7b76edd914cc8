// Cross-process audit checks against a running `loom up` (issue 7):
//   * completeness: 10,000 mixed requests, allowed and denied, from four
//     clients at once → exactly one record each, none missing or duplicated,
//     and the chain verifies (`loom audit verify`);
//   * RBAC: every request type in the policy × every role × three zones sent
//     through the real gateways: allowed iff the policy says so (allowed
//     state-changing calls executed too: their effect or their own error
//     checked), every denial audited (repeats merged into counted summaries);
//     every request message the protos define has a policy entry;
//   * canaries: tokens and key material never appear in logs, metrics, the
//     spool or the database file's bytes, and sealed payloads are not in clear;
//   * `loom keys rotate` and `loom token issue` are audited requests; old
//     payloads still decrypt after a rotation;
//   * `loom audit verify` through the CLI on tampered copies of the store:
//     exit 1 naming the seq (row edit, row delete, tail truncation) or the
//     anchor file (emptied, deleted).
#include "tests/support/cluster.hpp"

#include "libs/auditchain/keyring.hpp"
#include "libs/auth/authorize.hpp"
#include "libs/auth/policy.hpp"
#include "libs/files/files.hpp"
#include "libs/store/database.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/aggregator.pb.h"
#include "loom/v1/audit.pb.h"
#include "loom/v1/bulk.pb.h"
#include "loom/v1/common.pb.h"
#include "loom/v1/envelope.pb.h"
#include "loom/v1/ingest.pb.h"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "loom/v1/service.pb.h"
#include "loom/v1/trainer.pb.h"

#include <doctest/doctest.h>
#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include <dirent.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

wire::reply send(wire::client& c, const std::string& type, const std::string& body, const std::string& token,
                 const std::string& rid) {
  wire::request req{rid, type, body, token};
  auto r = c.call(req);
  REQUIRE_MESSAGE(r.ok(), "no reply to " << type << ": " << (r.ok() ? "" : r.err().message));
  return *r;
}

// Every chained audit event, paged by chain seq.
std::vector<v1::AuditEvent> all_events(cluster& c) {
  auto cli = c.client("audit", 1, 10000ms);
  std::vector<v1::AuditEvent> out;
  std::uint64_t after = 0;
  for (;;) {
    v1::AuditQueryRequest q;
    q.set_after_chain_seq(after);
    q.set_limit(10000);
    auto rep = send(*cli, "loom.v1.AuditQueryRequest", q.SerializeAsString(), c.admin(), wire::new_request_id());
    REQUIRE_MESSAGE(rep.ok(), rep.message);
    v1::AuditQueryReply r;
    REQUIRE(r.ParseFromString(rep.body));
    if (r.events_size() == 0) return out;
    for (auto& e : r.events()) {
      after = std::max<std::uint64_t>(after, e.seq());
      out.push_back(e);
    }
  }
}

// How often each request id appears, once `want` of them have arrived (or 60 s).
std::map<std::string, int> count_by_request(cluster& c, const std::set<std::string>& want) {
  std::map<std::string, int> seen;
  for (int round = 0; round < 120; ++round) {
    seen.clear();
    for (auto& e : all_events(c))
      if (want.count(e.request_id())) ++seen[e.request_id()];
    if (seen.size() >= want.size()) break;
    std::this_thread::sleep_for(500ms);
  }
  return seen;
}

// Denials as the audit log tells them, by (service, principal, action,
// reason): records of their own whose request id is in `rids`, plus the
// counts of merged-denial summaries whose first merged request is in `rids`
// (libs/runtime/denial_merge.hpp). `own` counts each own record's request id.
using denial_key = std::tuple<std::string, std::string, std::string, std::string>;
struct denial_tally {
  std::map<denial_key, std::uint64_t> by_key;
  std::map<std::string, int> own;
};
denial_tally tally_denials(const std::vector<v1::AuditEvent>& evs, const std::set<std::string>& rids) {
  denial_tally t;
  for (const auto& e : evs) {
    if (e.decision() != v1::DENY) continue;
    denial_key k{e.service(), e.principal(), e.action(), e.reason()};
    if (rids.count(e.request_id())) {
      ++t.own[e.request_id()];
      ++t.by_key[k];
      continue;
    }
    auto j = json::parse(e.payload(), nullptr, false);
    if (e.request_id().empty() && j.is_object() && rids.count(j.value("first_request_id", "")))
      t.by_key[k] += j.value("merged_denials", std::uint64_t{0});
  }
  return t;
}

// Waits (up to 40 s: the 10 s merge window and the spool) until the log
// accounts for every expected denial, then returns the tally.
denial_tally wait_for_denials(cluster& c, const std::map<denial_key, std::uint64_t>& expected,
                              const std::set<std::string>& rids) {
  denial_tally t;
  for (int round = 0; round < 80; ++round) {
    t = tally_denials(all_events(c), rids);
    if (t.by_key == expected) break;
    std::this_thread::sleep_for(500ms);
  }
  return t;
}

std::string slurp_all(const std::string& dir) {
  std::string all;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    if (auto t = files::read_file(it->path().string())) all += *t;
  }
  return all;
}

std::string hex(std::string_view bytes) {
  static const char* d = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : bytes) {
    out += d[ch >> 4];
    out += d[ch & 15];
  }
  return out;
}

}  // namespace

TEST_CASE("every request message the protos define has a policy entry and every entry names a message") {
  // One message per proto file, so each file's descriptors are linked in.
  const google::protobuf::Descriptor* anchors[] = {
      v1::PingRequest::descriptor(),     v1::RegisterNodeRequest::descriptor(), v1::ListDatasetsRequest::descriptor(),
      v1::TrainerStatusRequest::descriptor(), v1::AggregatorStatusRequest::descriptor(),
      v1::AuditQueryRequest::descriptor(), v1::BulkOffer::descriptor(),       v1::SubmitJobRequest::descriptor(),
      v1::Envelope::descriptor(),        v1::NodeId::descriptor()};
  std::set<std::string> linked;
  for (auto* d : anchors) linked.insert(d->file()->name());
  std::set<std::string> on_disk;
  for (auto& f : std::filesystem::directory_iterator(LOOM_PROTO_DIR "/loom/v1"))
    if (f.path().extension() == ".proto") on_disk.insert("loom/v1/" + f.path().filename().string());
  CHECK_MESSAGE(linked == on_disk, "a proto file is not referenced by this test: add one of its messages above");

  auto* pool = google::protobuf::DescriptorPool::generated_pool();
  std::set<std::string> requests;
  for (const auto& name : on_disk) {
    auto* file = pool->FindFileByName(name);
    REQUIRE_MESSAGE(file != nullptr, name);
    for (int i = 0; i < file->message_type_count(); ++i) {
      const std::string full = file->message_type(i)->full_name();
      if (full.ends_with("Request") || full == "loom.v1.BulkOffer" || full == "loom.v1.BulkChunk") requests.insert(full);
    }
  }
  for (const auto& r : requests) CHECK_MESSAGE(auth::find_policy(r) != nullptr, "no policy entry for " << r);
  for (const auto& e : auth::policy_table()) {
    CHECK_MESSAGE(pool->FindMessageTypeByName(std::string(e.type)) != nullptr, "policy names unknown " << e.type);
    CHECK_MESSAGE((e.service == "*" || layout::is_service(e.service)), e.type << " names service " << e.service);
  }
  MESSAGE(requests.size() << " request types, " << auth::policy_table().size() << " policy entries");
}

namespace {
// How an allowed state-changing call is made safely, and what it must answer.
struct mutating_call {
  std::string service, body;
  errc expect;
};
mutating_call allowed_mutating(std::string_view type, int n) {
  if (type == "loom.v1.CrashRequest") {  // crashes the actor: checked by its restarts
    v1::CrashRequest r;
    r.set_reason("rbac matrix");
    return {"aggregator", r.SerializeAsString(), errc::unavailable};
  }
  if (type == "loom.v1.RotateKeysRequest") return {"audit", "", errc::ok};
  if (type == "loom.v1.IssueTokenRequest") {
    v1::IssueTokenRequest r;
    r.set_principal("rbac-" + std::to_string(n));
    r.set_role("viewer");
    r.add_zones("*");
    r.set_ttl_s(60);
    return {"audit", r.SerializeAsString(), errc::ok};
  }
  if (type == "loom.v1.DrainNodeRequest") {
    v1::DrainNodeRequest r;
    r.mutable_node()->set_value("rbac-no-such-node");
    return {"scheduler", r.SerializeAsString(), errc::not_found};
  }
  if (type == "loom.v1.CancelJobRequest") {
    v1::CancelJobRequest r;
    r.set_id("job-rbac-none");
    return {"scheduler", r.SerializeAsString(), errc::not_found};
  }
  // Empty bodies: each service refuses them with its own (non-permission)
  // error. Bulk frames travel on the bulk sockets, never the request socket:
  // past the gateway, the service answers that it does not handle them here.
  static const std::map<std::string_view, mutating_call> empty = {
      {"loom.v1.RegisterNodeRequest", {"scheduler", "", errc::invalid_argument}},
      {"loom.v1.SubmitJobRequest", {"scheduler", "", errc::invalid_argument}},
      {"loom.v1.ImportDatasetRequest", {"ingest", "", errc::invalid_argument}},
      {"loom.v1.CancelTaskRequest", {"ingest", "", errc::not_found}},
      {"loom.v1.PullDatasetRequest", {"ingest", "", errc::invalid_argument}},
      {"loom.v1.BulkOffer", {"ingest", "", errc::unimplemented}},
      {"loom.v1.BulkChunk", {"ingest", "", errc::unimplemented}},
  };
  auto it = empty.find(type);
  REQUIRE_MESSAGE(it != empty.end(), "no safe call known for the mutating type " << type << ": add one here");
  return it->second;
}
}  // namespace

TEST_CASE("RBAC through the gateways: every request type x role x zone is allowed iff the policy says so, denials audited") {
  cluster c;
  REQUIRE(c.up);
  struct who {
    const char* name;
    std::optional<auth::role> r;  // nullopt: no token
  };
  const who roles[] = {{"none", std::nullopt},
                       {"viewer", auth::role::viewer},
                       {"operator", auth::role::operator_},
                       {"admin", auth::role::admin}};
  const std::vector<std::string> zones[] = {{"local"}, {"*"}, {"edge-far-away"}};
  std::map<std::string, std::unique_ptr<wire::client>> clients;
  auto client_of = [&](const std::string& service) -> wire::client& {
    auto& cli = clients[service];
    if (!cli) cli = c.client(service);
    REQUIRE(cli);
    return *cli;
  };
  std::set<std::string> denied_ids, mutated_ids;
  std::map<denial_key, std::uint64_t> expected_denials;
  int sent = 0, allowed = 0, mutated = 0, crashes = 0;
  std::uint32_t last_kek = 0;
  for (const auto& e : auth::policy_table()) {
    for (const auto& w : roles)
      for (const auto& z : zones) {
        const bool zone_ok = z[0] == "local" || z[0] == "*";
        const bool expect_allowed = w.r && zone_ok && *w.r >= e.min_role;
        mutating_call call{e.service == "*" ? "ingest" : std::string(e.service), "", errc::ok};
        if (expect_allowed && e.mutating) call = allowed_mutating(e.type, sent);
        auto rid = wire::new_request_id();
        std::string tok = w.r ? c.token(*w.r, z) : "";
        auto rep = send(client_of(call.service), std::string(e.type), call.body, tok, rid);
        ++sent;
        INFO(e.type << " as " << std::string(w.name) << " in zone " << z[0] << ": " << to_string(rep.code) << " "
                    << rep.message);
        const bool denied = rep.code == errc::permission_denied || rep.code == errc::unauthenticated;
        CHECK(denied == !expect_allowed);
        if (denied) {
          denied_ids.insert(rid);
          ++expected_denials[{call.service, w.r ? "tester" : "", std::string(e.type), rep.message}];
          continue;
        }
        ++allowed;
        if (!e.mutating) continue;
        // An allowed state-changing call reached its service: its effect, or its own error.
        ++mutated;
        mutated_ids.insert(rid);
        CHECK(rep.code == call.expect);
        if (e.type == "loom.v1.CrashRequest") ++crashes;
        if (e.type == "loom.v1.RotateKeysRequest") {
          v1::RotateKeysReply r;
          REQUIRE(r.ParseFromString(rep.body));
          CHECK(r.kek_version() > last_kek);
          last_kek = r.kek_version();
        }
        if (e.type == "loom.v1.IssueTokenRequest") {
          v1::IssueTokenReply r;
          REQUIRE(r.ParseFromString(rep.body));
          auto claims = auth::verify_token(r.token(), c.token_key, {std::time(nullptr), 0});
          REQUIRE_MESSAGE(claims.ok(), claims.err().message);
          CHECK(claims->principal == "rbac-" + std::to_string(sent - 1));
          CHECK(claims->r == auth::role::viewer);
        }
      }
  }
  MESSAGE(sent << " sent (" << allowed << " allowed, " << mutated << " of them state-changing, " << denied_ids.size()
               << " denied)");
  CHECK(mutated > 0);
  CHECK(last_kek >= 2);
  // The crash hook crashed the aggregator's actor each time it was allowed.
  v1::HealthReply h;
  for (int i = 0; i < 50; ++i) {
    auto hr = send(client_of("aggregator"), "loom.v1.HealthRequest", "", c.admin(), wire::new_request_id());
    REQUIRE(h.ParseFromString(hr.body));
    if (h.restarts() >= static_cast<std::uint64_t>(crashes)) break;
    std::this_thread::sleep_for(50ms);
  }
  CHECK(crashes == 2);
  CHECK(h.restarts() == static_cast<std::uint64_t>(crashes));

  // Every allowed state-changing call left one record, allowed or error, never deny.
  auto seen = count_by_request(c, mutated_ids);
  CHECK(seen.size() == mutated_ids.size());
  for (auto& [rid, n] : seen) CHECK_MESSAGE(n == 1, rid);
  // Every denial is in the log: a record of its own, or counted in the
  // summary of identical denials merged within a window.
  auto t = wait_for_denials(c, expected_denials, denied_ids);
  CHECK(t.by_key == expected_denials);
  for (auto& [rid, n] : t.own) CHECK_MESSAGE(n == 1, rid);
  for (auto& e : all_events(c)) {
    if (denied_ids.count(e.request_id())) CHECK(e.decision() == v1::DENY);
    if (mutated_ids.count(e.request_id())) CHECK(e.decision() != v1::DENY);
  }
}

TEST_CASE("10,000 mixed requests from four clients leave exactly one audit record each or a merged count and the chain verifies") {
  cluster c;
  REQUIRE(c.up);
  const int per_thread = 2500, threads = 4;
  const char* services[] = {"scheduler", "ingest", "trainer", "aggregator"};
  std::vector<std::vector<std::string>> ids(threads), denied(threads);
  std::vector<std::map<denial_key, std::uint64_t>> expected(threads);
  std::atomic<int> unexpected{0};
  std::vector<std::thread> pool;
  const std::string op = c.token(auth::role::operator_, {"local"});
  const std::string viewer = c.token(auth::role::viewer, {"local"});
  const std::string far = c.token(auth::role::admin, {"edge-far-away"});
  const auto started = std::chrono::steady_clock::now();
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      auto cli = c.client(services[t], 2, 10000ms);
      auto sched = c.client("scheduler", 2, 10000ms);
      v1::DrainNodeRequest drain;
      drain.mutable_node()->set_value("no-such-node");
      v1::CancelJobRequest cancel;
      cancel.set_id("job-none");
      for (int i = 0; i < per_thread; ++i) {
        auto rid = wire::new_request_id();
        wire::request req{rid, "", "", ""};
        wire::client* to = cli.get();
        errc want;
        std::string principal = "tester";
        switch (i % 5) {
          case 0:  // allowed, state-changing, fails (unknown node): decision error
            to = sched.get(), req.type = "loom.v1.DrainNodeRequest", req.body = drain.SerializeAsString(), req.token = op;
            want = errc::not_found;
            break;
          case 1:  // allowed, state-changing: cancel of an unknown job
            to = sched.get(), req.type = "loom.v1.CancelJobRequest", req.body = cancel.SerializeAsString(), req.token = op;
            want = errc::not_found;
            break;
          case 2:  // denied: role
            req.type = "loom.v1.CrashRequest", req.token = viewer, want = errc::permission_denied;
            break;
          case 3:  // denied: zone
            req.type = "loom.v1.PingRequest", req.token = far, want = errc::permission_denied;
            break;
          default:  // denied: no token
            req.type = "loom.v1.HealthRequest", want = errc::unauthenticated, principal = "";
        }
        auto rep = to->call(req);
        if (!rep.ok() || rep->code != want) ++unexpected;
        if (i % 5 < 2) {
          ids[t].push_back(rid);
        } else {
          denied[t].push_back(rid);
          if (rep.ok()) ++expected[t][{services[t], principal, req.type, rep->message}];
        }
      }
    });
  for (auto& th : pool) th.join();
  const auto windows = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started) / 10s + 2;
  CHECK(unexpected.load() == 0);
  std::set<std::string> want, denied_ids;
  std::map<denial_key, std::uint64_t> expected_denials;
  for (int t = 0; t < threads; ++t) {
    want.insert(ids[t].begin(), ids[t].end());
    denied_ids.insert(denied[t].begin(), denied[t].end());
    for (auto& [k, n] : expected[t]) expected_denials[k] += n;
  }
  REQUIRE(want.size() == 4000);
  REQUIRE(denied_ids.size() == 6000);
  // Allowed requests: one record each.
  auto seen = count_by_request(c, want);
  int missing = static_cast<int>(want.size() - seen.size()), duplicated = 0;
  for (auto& [rid, n] : seen) duplicated += n > 1;
  // Denials: each one its own record or counted in a merged summary, none twice.
  auto t = wait_for_denials(c, expected_denials, denied_ids);
  std::uint64_t accounted = 0;
  for (auto& [k, n] : t.by_key) accounted += n;
  for (auto& [rid, n] : t.own) duplicated += n > 1;
  MESSAGE("4,000 allowed: " << seen.size() << " recorded, " << missing << " missing; 6,000 denied: " << t.own.size()
                            << " own records + " << accounted - t.own.size() << " merged; " << duplicated
                            << " duplicated");
  CHECK(missing == 0);
  CHECK(duplicated == 0);
  CHECK(accounted == 6000);
  CHECK(t.by_key == expected_denials);
  // Merged: one record per kind of denial and 10 s window, not 6,000 rows.
  CHECK(t.own.size() <= expected_denials.size() * static_cast<std::size_t>(windows));
  auto v = run_loom(c.home.path(), {"audit", "verify", "--json"});
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  auto j = json::parse(v.out, nullptr, false);
  CHECK(j.value("ok", false));
  CHECK(j.value("rows", 0) >= 4000);
}

TEST_CASE("token issue and key rotation are audited, old payloads still decrypt, and no secret leaks anywhere") {
  cluster c;
  REQUIRE(c.up);
  const std::string home = c.home.path();
  // A token issued through the audit service; its principal rides in the
  // sealed payload of the issue record.
  auto issued = run_loom(home, {"token", "issue", "--role", "operator", "--zones", "local", "--principal",
                                "canary-payload-7f3a91", "--json"});
  REQUIRE_MESSAGE(issued.code == 0, issued.err);
  const std::string secret_token = json::parse(issued.out)["token"].get<std::string>();
  // Use a second, locally minted token: accepted and denied requests.
  const std::string used = c.token(auth::role::viewer, {"local"}, 600, 0, "canary-user");
  auto sched = c.client("scheduler");
  v1::DrainNodeRequest drain;
  drain.mutable_node()->set_value("x");
  for (int i = 0; i < 5; ++i) {
    send(*sched, "loom.v1.ListNodesRequest", "", used, wire::new_request_id());
    send(*sched, "loom.v1.DrainNodeRequest", drain.SerializeAsString(), used, wire::new_request_id());  // denied
    send(*sched, "loom.v1.PingRequest", "", secret_token, wire::new_request_id());
  }
  // Rotation through the CLI: version 2, audited.
  auto rot = run_loom(home, {"keys", "rotate", "--json"});
  REQUIRE_MESSAGE(rot.code == 0, rot.err);
  CHECK(json::parse(rot.out)["kek_version"] == 2);
  auto rot2 = run_loom(home, {"keys", "rotate", "--json"});
  CHECK(json::parse(rot2.out, nullptr, false).value("kek_version", 0) == 3);
  // A viewer may not rotate (denied, audited).
  CHECK(run_loom(home, {"keys", "rotate", "--token", c.token(auth::role::viewer)}).code == 3);

  // The issue record: decrypted for the operator's query, principal inside.
  std::vector<v1::AuditEvent> evs;
  for (int i = 0; i < 100; ++i) {
    evs = all_events(c);
    int rotations = 0;
    for (auto& e : evs) rotations += e.action() == "loom.v1.RotateKeysRequest" && e.decision() == v1::ALLOW;
    if (rotations == 2) break;
    std::this_thread::sleep_for(100ms);
  }
  int issues = 0, rotations = 0;
  for (auto& e : evs) {
    if (e.action() == "loom.v1.IssueTokenRequest" && e.decision() == v1::ALLOW) {
      ++issues;
      CHECK(e.payload().find("canary-payload-7f3a91") != std::string::npos);
      CHECK(e.payload().find(secret_token) == std::string::npos);
      CHECK(e.payload_state().empty());
    }
    if (e.action() == "loom.v1.RotateKeysRequest" && e.decision() == v1::ALLOW) {
      ++rotations;
      CHECK(e.payload().find("kek_version") != std::string::npos);
    }
  }
  CHECK(issues == 1);
  CHECK(rotations == 2);
  // Written before the rotation, read after it: still decrypts.
  auto tail = run_loom(home, {"audit", "tail", "--lines", "1000", "--json"});
  REQUIRE(tail.code == 0);
  CHECK(tail.out.find("canary-payload-7f3a91") != std::string::npos);

  // The canaries: the tokens, the token key, every CURVE secret key, every
  // audit key file's secret, never in logs, metrics, spools or the database's
  // bytes; the sealed principal never in clear in the database.
  std::vector<std::pair<std::string, std::string>> canaries = {
      {"issued token", secret_token}, {"used token", used}, {"token key (hex)", hex(c.token_key)},
      {"token key (raw)", c.token_key}};
  for (auto& f : std::filesystem::directory_iterator(c.paths.curve_dir()))
    if (f.path().extension() == ".key")
      if (auto t = files::read_file(f.path().string()))  // "<z85 secret>\n"
        canaries.emplace_back(f.path().filename().string(), t->substr(0, t->find('\n')));
  for (auto& f : std::filesystem::directory_iterator(c.paths.audit_keys())) {
    auto name = f.path().filename().string();
    if (!name.starts_with("kek-")) continue;
    auto t = files::read_file(f.path().string());
    REQUIRE(t.ok());
    canaries.emplace_back(name, t->substr(t->rfind(' ') + 1, 64));  // the key's hex
  }
  CHECK(canaries.size() >= 4 + 6 + 3);
  std::string metrics;
  for (auto s : layout::service_names) metrics += http_get(c.ep(std::string(s)).metrics, "/metrics");
  REQUIRE(metrics.find("loom_audit_chain_seq") != std::string::npos);
  std::string logs = slurp_all(home + "/logs");
  std::string spools = slurp_all(home + "/spool");
  for (auto& [what, secret] : canaries) {
    INFO(what);
    REQUIRE(secret.size() >= 16);
    CHECK(logs.find(secret) == std::string::npos);
    CHECK(metrics.find(secret) == std::string::npos);
    CHECK(spools.find(secret) == std::string::npos);
  }
  auto dbfile = files::read_file(home + "/loom.db");
  auto wal = files::read_file(home + "/loom.db-wal");
  std::string store = (dbfile ? *dbfile : "") + (wal ? *wal : "");
  REQUIRE(!store.empty());
  for (auto& [what, secret] : canaries) CHECK_MESSAGE(store.find(secret) == std::string::npos, what);
  CHECK_MESSAGE(store.find("canary-payload-7f3a91") == std::string::npos, "a sealed payload is in clear in the store");
  CHECK(store.find("canary-user") != std::string::npos);  // principals are clear columns by design
}

TEST_CASE("loom audit verify: exit 0 on the live chain, exit 1 naming the seq on tampered copies") {
  cluster c;
  REQUIRE(c.up);
  const std::string home = c.home.path();
  auto sched = c.client("scheduler");
  v1::DrainNodeRequest drain;
  drain.mutable_node()->set_value("x");
  const std::string op = c.token(auth::role::operator_);
  for (int i = 0; i < 300; ++i) send(*sched, "loom.v1.DrainNodeRequest", drain.SerializeAsString(), op, wire::new_request_id());
  // Wait for the records, then stop everything: the store is quiet.
  for (int i = 0; i < 100 && all_events(c).size() < 300; ++i) std::this_thread::sleep_for(100ms);
  REQUIRE(run_loom(home, {"down"}).code == 0);
  auto ok = run_loom(home, {"audit", "verify"});
  INFO(ok.out << ok.err);
  REQUIRE(ok.code == 0);
  CHECK(ok.out.find("ok") == 0);

  enum class anchors { kept, emptied, deleted };
  struct trial {
    const char* what;
    const char* sql;
    const char* names;
    anchors file = anchors::kept;
  };
  // The anchor file covers at least the checkpoint `loom down` left; tail
  // truncation below it is caught by the anchor. The anchor file itself
  // starts with its key's genesis checkpoint: emptied or gone, it fails verify.
  const std::string wipe = "DELETE FROM audit_events; DELETE FROM audit_checkpoints";
  const trial trials[] = {
      {"edited reason", "UPDATE audit_events SET reason = 'nothing happened' WHERE seq = 123", "seq 123"},
      {"deleted row", "DELETE FROM audit_events WHERE seq = 77", "seq 77"},
      {"truncated tail", "DELETE FROM audit_events WHERE seq > 250; DELETE FROM audit_checkpoints", "seq 251"},
      {"every row and checkpoint deleted", wipe.c_str(), "truncated at seq 1"},
      {"every row and checkpoint deleted, anchor file emptied", wipe.c_str(), "anchor_missing at seq 1", anchors::emptied},
      {"every row and checkpoint deleted, anchor file deleted", wipe.c_str(), "anchor_missing at seq 1", anchors::deleted},
      {"anchor file emptied", "", "anchors.log holds no checkpoint", anchors::emptied},
      {"anchor file deleted", "", "anchors.log does not exist", anchors::deleted},
  };
  for (const auto& t : trials) {
    INFO(t.what);
    temp_dir copy("loom-tamper");
    std::filesystem::copy(home, copy.path(), std::filesystem::copy_options::recursive);
    const std::string anchor_file = layout::paths{copy.path()}.audit_anchors();
    REQUIRE(std::filesystem::file_size(anchor_file) > 0);
    if (t.file == anchors::emptied) std::filesystem::resize_file(anchor_file, 0);
    if (t.file == anchors::deleted) std::filesystem::remove(anchor_file);
    auto db = store::database::open(copy.path() + "/loom.db");
    REQUIRE(db.ok());
    auto st = (*db)->with_transaction([&](store::transaction& tx) -> status {
      return tx.exec_script(std::string("DROP TRIGGER audit_events_append_only_update; "
                                        "DROP TRIGGER audit_events_append_only_delete; "
                                        "DROP TRIGGER audit_checkpoints_append_only_delete; ") +
                            t.sql);
    });
    REQUIRE_MESSAGE(st.ok(), st.err().to_string());
    db->reset();
    auto bad = run_loom(copy.path(), {"audit", "verify"});
    CHECK(bad.code == 1);
    CHECK_MESSAGE(bad.out.find(t.names) != std::string::npos, bad.out);
  }
}
