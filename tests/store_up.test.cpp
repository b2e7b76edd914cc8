// `loom up` on PostgreSQL: with LOOM_DATABASE_URL set, the services keep
// their state in the shared server instead of <data dir>/loom.db; and a
// database that cannot be reached is named (password masked) in the error;
// the audit chain there verifies with `loom audit verify --database`.
#include "libs/store/database.hpp"
#include "libs/store/testing.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <filesystem>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;

namespace {
std::int64_t count(store::database& db, const std::string& sql) {
  auto n = db.with_read_transaction([&](store::transaction& tx) -> result<std::int64_t> {
    auto r = tx.query(sql);
    if (!r) return r.err();
    return (*r)[0].get_i64(0);
  });
  return n ? *n : -1;
}
}  // namespace

TEST_CASE("loom up keeps the roster and the audit log in PostgreSQL when LOOM_DATABASE_URL is set") {
  auto scratch = store::testing::scratch::make(store::backend::postgres, "loomup");
  REQUIRE(scratch.ok());
  temp_dir home("loom-pg");
  up_guard guard{home.path()};
  ::setenv("LOOM_DATABASE_URL", scratch->url().c_str(), 1);
  auto up = run_loom(home.path(), {"up"}, 90s);
  ::unsetenv("LOOM_DATABASE_URL");
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);
  CHECK_FALSE(std::filesystem::exists(home.path() + "/loom.db"));

  auto db = store::database::open(scratch->url());
  REQUIRE(db.ok());
  std::int64_t nodes = 0, events = 0;
  for (int i = 0; i < 50 && (nodes < 6 || events < 6); ++i) {
    std::this_thread::sleep_for(100ms);
    nodes = count(**db, "SELECT COUNT(*) FROM nodes");
    events = count(**db, "SELECT COUNT(*) FROM audit_events WHERE action = 'loom.v1.RegisterNodeRequest'");
  }
  CHECK(nodes == 6);  // audit, scheduler, ingest, trainer, aggregator, console
  CHECK(events >= 6);
  // The roster outlives the scheduler process.
  auto eps = nlohmann::json::parse(run_loom(home.path(), {"status", "--json"}).out);
  CHECK(eps["nodes"].size() == 6);
  CHECK(run_loom(home.path(), {"down"}).code == 0);
  CHECK(count(**db, "SELECT COUNT(*) FROM nodes") == 6);
  // The audit chain in PostgreSQL verifies with every service down, its tail
  // signed at the clean stop (database checkpoint and anchor file).
  CHECK(count(**db, "SELECT COUNT(*) FROM audit_checkpoints") >= 1);
  auto verify = run_loom(home.path(), {"audit", "verify", "--database", scratch->url(), "--json"});
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  auto v = nlohmann::json::parse(verify.out, nullptr, false);
  CHECK(v.value("ok", false));
  CHECK(v.value("anchored_seq", 0) == v.value("last_seq", -1));
}

TEST_CASE("a service names an unreachable database with its password masked and gives up after the wait") {
  temp_dir home("loom-nodb");
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  ::setenv("LOOM_DATABASE_WAIT_S", "1", 1);
  auto r = run({bin("loom-scheduler"), "--data-dir", home.path(), "--database",
                "postgresql://loom:s3cret-pw@127.0.0.1:1/loom"},
               30s);
  ::unsetenv("LOOM_DATABASE_WAIT_S");
  INFO(r.err);
  CHECK(r.code == 1);
  CHECK(r.err.find("127.0.0.1:1") != std::string::npos);
  CHECK(r.err.find("***") != std::string::npos);
  CHECK(r.err.find("s3cret-pw") == std::string::npos);
}
