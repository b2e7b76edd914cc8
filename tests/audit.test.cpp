// Cross-process audit checks against a running `loom up` (issue 7):
//   * completeness: 10,000 mixed requests, allowed and denied, from four
//     clients at once → exactly one record each (denials: their own or counted
//     in a merged summary), none missing or duplicated, and the chain
//     verifies (`loom audit verify`);
//   * every request message the protos define has a policy entry (the RBAC
//     matrix through the gateways is rbac.test.cpp);
//   * canaries: tokens and key material never appear in logs, metrics, the
//     spool or the database file's bytes, and sealed payloads are not in clear;
//   * `loom keys rotate` and `loom token issue` are audited requests; old
//     payloads still decrypt after a rotation;
//   * `loom audit verify` through the CLI on tampered copies of the store:
//     exit 1 naming the seq (row edit, row delete, tail truncation) or the
//     anchor file (emptied, deleted).
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"

#include "libs/auditchain/keyring.hpp"
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
#include "loom/v1/sync.pb.h"
#include "loom/v1/trainer.pb.h"
#include "loom/v1/models.pb.h"
#include "loom/v1/sites.pb.h"
#include "loom/v1/replica.pb.h"

#include <doctest/doctest.h>
#include <google/protobuf/descriptor.h>
#include <nlohmann/json.hpp>

#include <dirent.h>

#include <atomic>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

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
      v1::Envelope::descriptor(),        v1::NodeId::descriptor(),       v1::SyncManifest::descriptor()};
  std::set<std::string> linked;
  for (auto* d : anchors) linked.insert(d->file()->name());
  linked.insert(v1::ListSitesRequest::descriptor()->file()->name());
  linked.insert(v1::ListModelsRequest::descriptor()->file()->name());
  linked.insert(v1::ReplicaStatusRequest::descriptor()->file()->name());
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
      // sync.proto is the dataset sync peers' own protocol on the sync server's
      // socket: admitted by CURVE peer keys (keys/peers), never through the role policy.
      if (name == "loom/v1/sync.proto") continue;
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
  // Every store file: the services' loom.db and the audit chain's audit.db, with their WALs.
  std::string store;
  for (const char* f : {"/loom.db", "/loom.db-wal", "/audit.db", "/audit.db-wal"})
    if (auto bytes = files::read_file(home + f)) store += *bytes;
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
    auto db = store::database::open(layout::paths{copy.path()}.audit_store());
    REQUIRE(db.ok());
    auto st = (*db)->with_transaction([&](store::transaction& tx) -> status {
      return tx.exec_script(std::string("DROP TRIGGER audit_events_append_only_update; "
                                        "DROP TRIGGER audit_events_retention; "
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
