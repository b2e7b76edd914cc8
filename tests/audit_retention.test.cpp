// Audit retention through the CLI (issue 32 item 5):
//   * `loom audit archive` against a running `loom up`: the admin's request
//     archives nothing younger than the retention; a shorter cut-off is
//     refused (exit 3) even for the admin, a viewer is refused at the gateway,
//     and each of them is in the audit chain, the refusals as deny; `loom
//     keys status` lists the audit KEK versions with their ages;
//   * `loom audit verify --archive DIR` on a data dir whose oldest records
//     were archived by the audit service's own code (a chain stamped 200–300
//     days ago): exit 0 walking archive and live rows as one chain; a changed
//     archive file is exit 1 naming it; without --archive the live rows
//     verify and the output says where the rest went.
#include "tests/support/audit_events.hpp"
#include "tests/support/cluster.hpp"

#include "libs/files/files.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/archive.hpp"
#include "services/audit/audit_log.hpp"
#include "services/audit/schema.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int count_action(const std::vector<v1::AuditEvent>& evs, v1::Decision d) {
  int n = 0;
  for (const auto& e : evs) n += e.action() == "loom.v1.AuditArchiveRequest" && e.decision() == d;
  return n;
}

}  // namespace

TEST_CASE("loom audit archive keeps everything younger than the retention, refuses a shorter cut-off even to an admin, and audits each try, and loom keys status shows the keys' ages") {
  cluster c;
  REQUIRE(c.up);
  const std::string home = c.home.path();

  auto none = run_loom(home, {"audit", "archive", "--json"});
  REQUIRE_MESSAGE(none.code == 0, none.out << none.err);
  auto j = json::parse(none.out);
  CHECK(j["rows"] == 0);
  CHECK(j["older_than_days"] == 180);
  CHECK_MESSAGE(has(j.value("why_none", ""), "younger than 180 days"), none.out);
  auto dry = run_loom(home, {"audit", "archive", "--dry-run"});
  CHECK_MESSAGE(dry.code == 0, dry.err);
  CHECK_MESSAGE(has(dry.out, "nothing archived"), dry.out);

  auto shorter = run_loom(home, {"audit", "archive", "--older-than-days", "10"});
  CHECK(shorter.code == 3);
  CHECK_MESSAGE(has(shorter.err, "kept 180 days"), shorter.err);
  CHECK_MESSAGE(has(shorter.err, "--older-than-days 10 is refused"), shorter.err);
  auto viewer = run_loom(home, {"audit", "archive", "--token", c.token(auth::role::viewer)});
  CHECK(viewer.code == 3);
  auto op = run_loom(home, {"audit", "archive", "--token", c.token(auth::role::operator_)});
  CHECK(op.code == 3);

  // Every try is a record: two allowed (the dry run too), three denied.
  std::vector<v1::AuditEvent> evs;
  eventually(
      [&] {
        evs = all_events(c);
        return count_action(evs, v1::ALLOW) >= 2 && count_action(evs, v1::DENY) >= 3;
      },
      10s, 50ms);
  CHECK(count_action(evs, v1::ALLOW) == 2);
  CHECK(count_action(evs, v1::DENY) == 3);

  // `loom keys status`: the audit KEK's version and age, the next rotation due in 30 days;
  // a rotation adds version 2, which then wraps new keys.
  auto ks = run_loom(home, {"keys", "status", "--json"});
  REQUIRE_MESSAGE(ks.code == 0, ks.out << ks.err);
  auto rings = json::parse(ks.out)["key_encryption_keys"];
  REQUIRE(rings.size() == 2);
  CHECK(rings[0]["keys"] == "audit");
  REQUIRE(rings[0]["keks"].size() == 1);
  CHECK(rings[0]["keks"][0]["age_days"].get<double>() < 1);
  CHECK(rings[0]["next_rotation_in_days"].get<double>() > 29);
  CHECK(rings[1]["keys"] == "at rest");
  REQUIRE(run_loom(home, {"keys", "rotate"}).code == 0);
  auto ks2 = run_loom(home, {"keys", "status"});
  CHECK_MESSAGE(has(ks2.out, "version 2"), ks2.out);
  CHECK_MESSAGE(has(ks2.out, "(wraps new keys)"), ks2.out);
  CHECK_MESSAGE(has(ks2.out, "(unwraps only)"), ks2.out);

  // Nothing was archived: verify --archive finds no segments and passes.
  auto v = run_loom(home, {"audit", "verify", "--archive", layout::paths{home}.audit_archive(), "--json"});
  CHECK_MESSAGE(v.code == 0, v.out << v.err);
  CHECK_MESSAGE(has(v.out, "no archived segments"), v.out);
}

TEST_CASE("loom audit verify --archive walks archived and live records as one chain and names a changed archive file") {
  temp_dir home("loom-retention");
  const layout::paths paths{home.path()};
  REQUIRE(files::make_dirs(paths.audit_keys(), 0700).ok());
  REQUIRE(files::make_dirs(home.path() + "/audit", 0700).ok());
  const std::string url = home.path() + "/audit.db";
  const auto now = std::chrono::system_clock::now();
  auto clock = now - std::chrono::days(300);
  {
    auto db = store::database::open(url);
    REQUIRE(db.ok());
    REQUIRE(store::migrate(**db, audit_service::audit_migrations()).ok());
    audit_service::audit_log_options o;
    o.url = url;
    o.keys_dir = paths.audit_keys();
    o.anchor_path = paths.audit_anchors();
    o.clock = [&clock] { return clock; };
    auto log = audit_service::audit_log::open(std::move(o));
    REQUIRE(log.ok());
    std::uint64_t seq = 0;
    // 200 records 300 days old, 100 at 200 days, 20 from today; a checkpoint after each run.
    for (auto [n, age] : {std::pair{200, 300}, std::pair{100, 200}, std::pair{20, 0}}) {
      clock = now - std::chrono::days(age);
      std::vector<std::string> batch;
      for (int i = 0; i < n; ++i) {
        v1::AuditEvent e;
        e.set_source("scheduler@retention");
        e.set_source_seq(++seq);
        e.set_unix_ns(static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(clock.time_since_epoch()).count()));
        e.set_action("loom.v1.CancelJobRequest");
        e.set_principal("op-a");
        e.set_decision(v1::ALLOW);
        batch.push_back(e.SerializeAsString());
      }
      REQUIRE((*log)->append_batch(batch).ok());
      REQUIRE((*log)->tick(true).ok());
    }
    auto done = audit_service::archive_old(**db, paths.audit_archive(), audit_service::archive_request{}, now);
    REQUIRE(done.ok());
    REQUIRE(done->entry.first_seq == 1);
    REQUIRE(done->entry.last_seq == 300);
  }

  auto whole = run_loom(home.path(), {"audit", "verify", "--archive", paths.audit_archive(), "--json"});
  INFO(whole.out << whole.err);
  REQUIRE(whole.code == 0);
  auto j = json::parse(whole.out);
  CHECK(j["rows"] == 320);
  CHECK(j["from_seq"] == 1);
  CHECK(j["anchored_seq"] == 320);

  auto live = run_loom(home.path(), {"audit", "verify"});
  CHECK_MESSAGE(live.code == 0, live.out << live.err);
  CHECK_MESSAGE(has(live.out, "seqs 1..300 are archived"), live.out);
  CHECK_MESSAGE(has(live.out, "20 rows"), live.out);

  // One changed character in an archived record.
  std::string file;  // the one archive file
  for (const auto& e : std::filesystem::directory_iterator(paths.audit_archive())) file = e.path().string();
  REQUIRE(file.ends_with(".jsonl"));
  auto bytes = files::read_file(file);
  REQUIRE(bytes.ok());
  auto at = bytes->find("CancelJob");
  REQUIRE(at != std::string::npos);
  std::string changed = *bytes;
  changed[at] = 'X';
  REQUIRE(files::write_atomic(file, changed, 0600).ok());
  auto bad = run_loom(home.path(), {"audit", "verify", "--archive", paths.audit_archive()});
  CHECK(bad.code == 1);
  CHECK_MESSAGE(has(bad.out, "archive at seq 1"), bad.out);
  CHECK_MESSAGE(has(bad.out, file), bad.out);
  // Gone altogether.
  std::filesystem::remove(file);
  auto gone = run_loom(home.path(), {"audit", "verify", "--archive", paths.audit_archive()});
  CHECK(gone.code == 1);
  CHECK_MESSAGE(has(gone.out, "is missing"), gone.out);
}
