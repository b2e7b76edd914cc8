// The store suite. Compiled twice: store_sqlite_tests (a temp SQLite file per
// case) and store_postgres_tests (a scratch database per case on the throwaway
// cluster of the CTest fixture store_pg_start). CTest names end in [sqlite] or
// [postgres]. Cases marked "PostgreSQL:" or "SQLite:" concern one engine only.
// Longer than our usual file on purpose: one source is what guarantees that
// both engines pass the very same suite.
#include "libs/store/database.hpp"
#include "libs/store/group_commit.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "libs/store/versioned.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <limits>
#include <stdexcept>
#include <mutex>
#include <thread>
#include <vector>

namespace store = loom::store;
using loom::errc;
using store::transaction;

namespace {

constexpr store::backend engine = store::testing::suite_backend;

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct fresh {
  store::testing::scratch scratch;
  std::unique_ptr<store::database> db;
  std::unique_ptr<store::database> another() const {
    auto d = store::database::open(scratch.url());
    REQUIRE_MESSAGE(d.ok(), why(d));
    return std::move(*d);
  }
};

fresh open_fresh(const std::string& name) {
  auto s = store::testing::scratch::make(engine, name);
  REQUIRE_MESSAGE(s.ok(), why(s));
  auto d = store::database::open(s->url());
  REQUIRE_MESSAGE(d.ok(), why(d));
  REQUIRE(d.value()->kind() == engine);
  return fresh{std::move(*s), std::move(*d)};
}

void script(store::database& db, const std::string& sql) {
  auto r = db.with_transaction([&](transaction& tx) { return tx.exec_script(sql); });
  REQUIRE_MESSAGE(r.ok(), why(r));
}

std::int64_t count(store::database& db, const std::string& table) {
  auto n = db.with_transaction([&](transaction& tx) -> loom::result<std::int64_t> {
    auto rows = tx.query("SELECT COUNT(*) AS n FROM " + table);
    if (!rows.ok()) return rows.err();
    return (*rows)[0].get_i64("n");
  });
  REQUIRE_MESSAGE(n.ok(), why(n));
  return *n;
}

store::migration mig(const std::string& owner, int version, const std::string& sql) {
  return store::migration{.owner = owner, .version = version, .description = owner + " step " + std::to_string(version),
                          .sql = sql};
}

}  // namespace

TEST_CASE("every value kind round-trips, including NULL and binary with NUL bytes") {
  auto f = open_fresh("round_trip");
  script(*f.db, "CREATE TABLE kinds (id BIGINT NOT NULL PRIMARY KEY, i BIGINT, d DOUBLE PRECISION, t TEXT, b BYTEA)");
  std::string all_bytes;
  for (int c = 255; c >= 0; --c) all_bytes += static_cast<char>(c);
  const store::blob bin{std::string("\0\x01\xff zero\0", 9) + all_bytes};
  const std::int64_t lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  auto put = f.db->with_transaction([&](transaction& tx) -> loom::status {
    const char* ins = "INSERT INTO kinds (id, i, d, t, b) VALUES ($1, $2, $3, $4, $5)";
    for (auto r : {tx.exec(ins, {1, lo, -0.1, "héllo ✓ 'quoted' \\x00", bin}),
                   tx.exec(ins, {2, hi, 1e300, "", store::blob{}}),
                   tx.exec(ins, {3, store::null, store::null, store::null, store::null})}) {
      if (!r.ok()) return r.err();
      if (*r != 1) return loom::make_error(errc::internal, "insert affected " + std::to_string(*r));
    }
    return {};
  });
  REQUIRE_MESSAGE(put.ok(), why(put));
  auto rows = f.db->with_transaction(
      [](transaction& tx) { return tx.query("SELECT id, i, d, t, b FROM kinds ORDER BY id"); });
  REQUIRE_MESSAGE(rows.ok(), why(rows));
  REQUIRE(rows->size() == 3);
  const auto& a = (*rows)[0];
  CHECK(a.get_i64(1).value() == lo);
  CHECK(a.get_f64(2).value() == -0.1);
  CHECK(a.get_text(3).value() == "héllo ✓ 'quoted' \\x00");
  CHECK(a.get_blob(4).value() == bin);
  CHECK(a.get_blob(4).value().bytes.size() == 9 + 256);
  const auto& b = (*rows)[1];
  CHECK(b.get_i64(1).value() == hi);
  CHECK(b.get_f64(2).value() == 1e300);
  CHECK(b.get_text(3).value() == "");
  CHECK(b.get_blob(4).value() == store::blob{});
  const auto& c = (*rows)[2];
  for (std::size_t i = 1; i < 5; ++i) {
    CHECK(c.is_null(i));
    CHECK(store::kind_name(c[i]) == "null");
  }
  CHECK_FALSE(b.is_null(3));  // empty text is not NULL on either engine
}

TEST_CASE("columns are read by index or by name, and a wrong kind or unknown name is invalid_argument naming it") {
  auto f = open_fresh("getters");
  auto rows = f.db->with_transaction([](transaction& tx) {
    return tx.query("SELECT CAST(7 AS BIGINT) AS seven, CAST('x' AS TEXT) AS letter, CAST(2.5 AS DOUBLE PRECISION) AS d");
  });
  REQUIRE_MESSAGE(rows.ok(), why(rows));
  const auto& r = (*rows)[0];
  CHECK(r.names() == std::vector<std::string>{"seven", "letter", "d"});
  CHECK(r.get_i64("seven").value() == 7);
  CHECK(r.get_f64("seven").value() == 7.0);  // an integer reads as a double
  CHECK(r.get_text(1).value() == "x");
  CHECK(r.get_f64("d").value() == 2.5);
  auto wrong = r.get_i64("letter");
  REQUIRE_FALSE(wrong.ok());
  CHECK(wrong.code() == errc::invalid_argument);
  CHECK(contains(wrong.err().message, "'letter' holds text"));
  auto missing = r.get_text("nope");
  CHECK(missing.code() == errc::invalid_argument);
  CHECK(contains(missing.err().message, "'nope'"));
  CHECK(r.get_i64(9).code() == errc::invalid_argument);
}

TEST_CASE("placeholders may repeat and come in any order, and a wrong parameter count is invalid_argument") {
  auto f = open_fresh("placeholders");
  script(*f.db, "CREATE TABLE p (a BIGINT, b BIGINT, c BIGINT)");
  auto ok = f.db->with_transaction([](transaction& tx) {
    return tx.exec("INSERT INTO p (a, b, c) VALUES ($2, $1, $2)", {10, 20});
  });
  REQUIRE_MESSAGE(ok.ok(), why(ok));
  auto rows = f.db->with_transaction([](transaction& tx) { return tx.query("SELECT a, b, c FROM p"); });
  REQUIRE(rows.ok());
  CHECK((*rows)[0].get_i64(0).value() == 20);
  CHECK((*rows)[0].get_i64(1).value() == 10);
  CHECK((*rows)[0].get_i64(2).value() == 20);
  auto few = f.db->with_transaction([](transaction& tx) {
    return tx.exec("INSERT INTO p (a, b, c) VALUES ($1, $2, $3)", {1, 2});
  });
  CHECK_MESSAGE(few.code() == errc::invalid_argument, why(few));
  auto many = f.db->with_transaction([](transaction& tx) { return tx.exec("INSERT INTO p (a) VALUES ($1)", {1, 2}); });
  CHECK(many.code() == errc::invalid_argument);
  CHECK(count(*f.db, "p") == 1);
}

TEST_CASE("a transaction whose callback returns an error writes nothing") {
  auto f = open_fresh("rollback_error");
  script(*f.db, "CREATE TABLE t (x BIGINT)");
  auto r = f.db->with_transaction([](transaction& tx) -> loom::result<int> {
    for (int i = 0; i < 3; ++i) {
      if (auto w = tx.exec("INSERT INTO t (x) VALUES ($1)", {i}); !w.ok()) return w.err();
    }
    return loom::make_error(errc::conflict, "changed my mind");
  });
  CHECK(r.code() == errc::conflict);
  CHECK(r.err().message == "changed my mind");
  CHECK(count(*f.db, "t") == 0);
  auto kept = f.db->with_transaction([](transaction& tx) -> loom::result<int> {
    auto w = tx.exec("INSERT INTO t (x) VALUES ($1)", {5});
    if (!w.ok()) return w.err();
    return 42;
  });
  REQUIRE_MESSAGE(kept.ok(), why(kept));
  CHECK(*kept == 42);
  CHECK(count(*f.db, "t") == 1);
}

TEST_CASE("a transaction whose callback throws writes nothing and reports internal with the exception's text") {
  auto f = open_fresh("rollback_throw");
  script(*f.db, "CREATE TABLE t (x BIGINT)");
  auto r = f.db->with_transaction([](transaction& tx) -> loom::status {
    (void)tx.exec("INSERT INTO t (x) VALUES (1)");
    throw std::runtime_error("boom in the middle");
  });
  CHECK(r.code() == errc::internal);
  CHECK(contains(r.err().message, "boom in the middle"));
  CHECK(count(*f.db, "t") == 0);
}

TEST_CASE("a failed statement dooms the transaction even when the callback ignores it") {
  auto f = open_fresh("doomed");
  script(*f.db, "CREATE TABLE t (x BIGINT NOT NULL PRIMARY KEY)");
  loom::errc later = errc::ok;
  auto r = f.db->with_transaction([&](transaction& tx) -> loom::status {
    (void)tx.exec("INSERT INTO t (x) VALUES (1)");
    (void)tx.exec("INSERT INTO t (x) VALUES (1)");  // duplicate, ignored by this careless callback
    later = tx.exec("INSERT INTO t (x) VALUES (2)").code();
    return {};
  });
  CHECK(r.code() == errc::already_exists);
  CHECK(later == errc::already_exists);
  CHECK(count(*f.db, "t") == 0);
}

TEST_CASE("constraint and SQL errors become errc carrying the database's message") {
  auto f = open_fresh("errors");
  script(*f.db,
         "CREATE TABLE parent (id BIGINT NOT NULL PRIMARY KEY);"
         "CREATE TABLE child (id BIGINT NOT NULL PRIMARY KEY, parent_id BIGINT NOT NULL REFERENCES parent (id),"
         " qty BIGINT CHECK (qty >= 0), label TEXT NOT NULL DEFAULT '');"
         "INSERT INTO parent (id) VALUES (1);");
  auto one = [&](const std::string& sql, std::initializer_list<store::value> params) {
    return f.db->with_transaction([&](transaction& tx) { return tx.exec(sql, params); });
  };
  REQUIRE(one("INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)", {1, 1, 1}).ok());
  auto dup = one("INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)", {1, 1, 1});
  CHECK(dup.code() == errc::already_exists);
  auto no_parent = one("INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)", {2, 99, 1});
  CHECK(no_parent.code() == errc::invalid_argument);
  CHECK(contains(no_parent.err().message, "FOREIGN KEY") + contains(no_parent.err().message, "foreign key") == 1);
  auto negative = one("INSERT INTO child (id, parent_id, qty) VALUES ($1, $2, $3)", {3, 1, -1});
  CHECK(negative.code() == errc::invalid_argument);
  CHECK(contains(negative.err().message, "CHECK") + contains(negative.err().message, "check") >= 1);
  auto null_label = one("INSERT INTO child (id, parent_id, qty, label) VALUES ($1, $2, $3, $4)", {4, 1, 1, store::null});
  CHECK_MESSAGE(null_label.code() == errc::invalid_argument, why(null_label));
  CHECK(contains(null_label.err().message, "label"));
  auto syntax = one("INSERT INTO child VALUE (1)", {});
  CHECK(syntax.code() == errc::invalid_argument);
  auto unknown = one("SELECT * FROM no_such_table", {});
  CHECK(unknown.code() == errc::invalid_argument);
  CHECK(contains(unknown.err().message, "no_such_table"));
  auto two = one("SELECT 1; SELECT 2", {});
  CHECK(two.code() == errc::invalid_argument);
  CHECK(count(*f.db, "child") == 1);
}

TEST_CASE("a read transaction sees committed data without waiting for a writer, and refuses writes") {
  auto f = open_fresh("read_tx");
  script(*f.db, "CREATE TABLE t (x BIGINT); INSERT INTO t (x) VALUES (1)");
  auto writer = f.another();
  std::atomic<bool> writing{false};
  loom::status held;
  std::thread slow([&] {
    held = writer->with_transaction([&](transaction& tx) -> loom::status {
      if (auto w = tx.exec("UPDATE t SET x = 2"); !w.ok()) return w.err();
      writing = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(400));
      return {};
    });
    writing = true;  // also when it failed: do not leave the main thread waiting
  });
  while (!writing) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto t0 = std::chrono::steady_clock::now();
  auto seen = f.db->with_read_transaction([](transaction& tx) { return tx.query("SELECT x FROM t"); });
  auto took = std::chrono::steady_clock::now() - t0;
  slow.join();
  REQUIRE_MESSAGE(held.ok(), why(held));
  REQUIRE_MESSAGE(seen.ok(), why(seen));
  CHECK((*seen)[0].get_i64(0).value() == 1);  // the writer had not committed
  CHECK(took < std::chrono::milliseconds(300));
  auto write = f.db->with_read_transaction([](transaction& tx) { return tx.exec("UPDATE t SET x = 3"); });
  CHECK_MESSAGE(write.code() == errc::invalid_argument, why(write));
  auto after = f.db->with_read_transaction([](transaction& tx) { return tx.query("SELECT x FROM t"); });
  REQUIRE(after.ok());
  CHECK((*after)[0].get_i64(0).value() == 2);
}

TEST_CASE("nested work that fails is undone alone and the transaction goes on") {
  auto f = open_fresh("nested_savepoint");
  script(*f.db, "CREATE TABLE t (x BIGINT NOT NULL PRIMARY KEY)");
  std::vector<loom::errc> codes;
  auto r = f.db->with_transaction([&](transaction& tx) -> loom::status {
    auto ins = [](std::int64_t x) {
      return [x](transaction& t) { return t.exec("INSERT INTO t (x) VALUES ($1)", {x}); };
    };
    codes.push_back(tx.nested(ins(1)).code());
    codes.push_back(tx.nested([&](transaction& t) -> loom::status {
                        (void)t.exec("INSERT INTO t (x) VALUES (2)");
                        return t.exec("INSERT INTO t (x) VALUES (1)").code() == errc::ok
                                   ? loom::ok_status()
                                   : loom::status(loom::make_error(errc::already_exists, "dup"));
                      }).code());
    codes.push_back(tx.nested([](transaction& t) -> loom::status {
                        (void)t.exec("INSERT INTO t (x) VALUES (3)");
                        throw std::runtime_error("unit threw");
                      }).code());
    codes.push_back(tx.nested(ins(4)).code());
    return {};
  });
  REQUIRE_MESSAGE(r.ok(), why(r));
  CHECK(codes == std::vector<loom::errc>{errc::ok, errc::already_exists, errc::internal, errc::ok});
  auto rows = f.db->with_transaction([](transaction& tx) { return tx.query("SELECT x FROM t ORDER BY x"); });
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 2);  // 1 and 4: the failed units' 2 and 3 were undone
  CHECK((*rows)[0].get_i64(0).value() == 1);
  CHECK((*rows)[1].get_i64(0).value() == 4);
}

TEST_CASE("group commit answers each thread's unit after a shared durable commit and undoes a failing unit alone") {
  auto f = open_fresh("group_commit");
  script(*f.db, "CREATE TABLE t (x BIGINT NOT NULL PRIMARY KEY, who BIGINT NOT NULL)");
  constexpr int threads = 8, per_thread = 40;
  int oks = 0, dups = 0, others = 0;
  std::uint64_t commits = 0, units = 0;
  {
    store::group_commit gc(f.another());
    std::vector<std::vector<loom::errc>> codes(threads);
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          // every 5th unit re-inserts a key this thread already wrote: already_exists
          const std::int64_t x = t * 1000 + (i % 5 == 4 ? i - 1 : i);
          auto r = gc.run([&](transaction& tx) { return tx.exec("INSERT INTO t (x, who) VALUES ($1, $2)", {x, t}); });
          codes[t].push_back(r.code());
        }
      });
    }
    for (auto& t : ts) t.join();
    for (auto& c : codes) {
      for (auto e : c) (e == errc::ok ? oks : e == errc::already_exists ? dups : others)++;
    }
    commits = gc.commits();
    units = gc.units();
  }
  MESSAGE(units << " units in " << commits << " commits");
  CHECK(others == 0);
  CHECK(dups == threads * per_thread / 5);
  CHECK(oks == threads * per_thread - dups);
  CHECK(units == threads * per_thread);
  CHECK(commits <= units);
  CHECK(count(*f.db, "t") == oks);  // every acknowledged unit is there, no failed one
}

TEST_CASE("group commit's async units are answered in submission order, a failing one alone, all durable by then") {
  auto f = open_fresh("group_commit_async");
  script(*f.db, "CREATE TABLE t (x BIGINT NOT NULL PRIMARY KEY)");
  std::mutex mu;
  std::vector<std::pair<std::int64_t, loom::errc>> answers;
  constexpr int n = 300;
  {
    store::group_commit gc(f.another());
    for (int i = 0; i < n; ++i) {
      const std::int64_t x = i % 50 == 49 ? i - 1 : i;  // every 50th repeats a key: already_exists
      gc.submit_async(
          [x](transaction& tx) -> loom::status {
            auto r = tx.exec("INSERT INTO t (x) VALUES ($1)", {x});
            if (!r) return r.err();
            return loom::ok_status();
          },
          [&, i](loom::status st) {
            std::lock_guard lk(mu);
            answers.emplace_back(i, st.code());
          });
    }
  }  // the destructor runs what is queued
  REQUIRE(answers.size() == n);
  int dups = 0;
  for (int i = 0; i < n; ++i) {
    CHECK(answers[static_cast<std::size_t>(i)].first == i);  // in order
    const bool dup = i % 50 == 49;
    CHECK(answers[static_cast<std::size_t>(i)].second == (dup ? errc::already_exists : errc::ok));
    dups += dup;
  }
  CHECK(count(*f.db, "t") == n - dups);
}

TEST_CASE("with_transaction inside another on the same database is refused") {
  auto f = open_fresh("nested");
  auto r = f.db->with_transaction([&](transaction&) {
    return f.db->with_transaction([](transaction&) { return loom::ok_status(); });
  });
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, "inside another"));
}

TEST_CASE("hundreds of distinct statements run through the bounded statement cache") {
  auto f = open_fresh("cache");
  script(*f.db, "CREATE TABLE t (x BIGINT)");
  auto r = f.db->with_transaction([](transaction& tx) -> loom::status {
    for (int i = 0; i < 300; ++i) {
      auto w = tx.exec("INSERT INTO t (x) VALUES (" + std::to_string(i) + ")");
      if (!w.ok()) return w.err();
    }
    return {};
  });
  REQUIRE_MESSAGE(r.ok(), why(r));
  for (int round = 0; round < 2; ++round) {  // the next BEGIN drops the full cache
    auto s = f.db->with_transaction([](transaction& tx) { return tx.query("SELECT SUM(x) AS s FROM t"); });
    REQUIRE_MESSAGE(s.ok(), why(s));
    CHECK((*s)[0].get_i64("s").value() == 299 * 300 / 2);
  }
}

// ---------------------------------------------------------------- migrations

TEST_CASE("migrations apply once, in order, and are recorded in schema_migrations") {
  auto f = open_fresh("migrate_once");
  std::vector<store::migration> ms = {
      mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)"),
      mig("beta", 1, "CREATE TABLE b1 (x BIGINT)"),
      mig("alpha", 2, "ALTER TABLE a1 ADD COLUMN y TEXT; INSERT INTO a1 (x, y) VALUES (1, 'one')"),
  };
  auto first = store::migrate(*f.db, ms);
  REQUIRE_MESSAGE(first.ok(), why(first));
  auto recorded = [&] {
    auto rows = f.db->with_transaction([](transaction& tx) {
      return tx.query("SELECT owner, version, description, checksum, applied_at FROM schema_migrations "
                      "ORDER BY owner, version");
    });
    REQUIRE_MESSAGE(rows.ok(), why(rows));
    return std::move(*rows);
  };
  auto before = recorded();
  REQUIRE(before.size() == 3);
  CHECK(before[0].get_text("owner").value() == "alpha");
  CHECK(before[1].get_i64("version").value() == 2);
  CHECK(before[1].get_text("description").value() == "alpha step 2");
  CHECK(before[1].get_text("checksum").value() == store::checksum(ms[2]));
  CHECK(before[2].get_text("owner").value() == "beta");
  CHECK(before[0].get_i64("applied_at").value() > 1'600'000'000'000'000'000);
  CHECK(count(*f.db, "a1") == 1);

  auto again = store::migrate(*f.db, ms);  // idempotent: nothing re-applied (the INSERT would double)
  REQUIRE_MESSAGE(again.ok(), why(again));
  CHECK(count(*f.db, "a1") == 1);
  auto after = recorded();
  REQUIRE(after.size() == 3);
  CHECK(after[1].get_i64("applied_at").value() == before[1].get_i64("applied_at").value());

  ms.push_back(mig("alpha", 3, "INSERT INTO a1 (x, y) VALUES (3, 'three')"));
  REQUIRE(store::migrate(*f.db, ms).ok());
  CHECK(count(*f.db, "a1") == 2);
  CHECK(recorded().size() == 4);
}

TEST_CASE("a database newer than the binary is refused with a clear message and left unchanged") {
  auto f = open_fresh("migrate_newer");
  std::vector<store::migration> ms = {mig("scheduler", 1, "CREATE TABLE s1 (x BIGINT)"),
                                      mig("scheduler", 2, "CREATE TABLE s2 (x BIGINT)"),
                                      mig("scheduler", 3, "CREATE TABLE s3 (x BIGINT)")};
  REQUIRE(store::migrate(*f.db, ms).ok());
  std::vector<store::migration> older = {ms[0], mig("other", 1, "CREATE TABLE o1 (x BIGINT)")};
  auto r = store::migrate(*f.db, older);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(r.err().message ==
        "database schema for 'scheduler' is at version 3 but this binary knows only up to 1: upgrade loom");
  CHECK(count(*f.db, "schema_migrations") == 3);  // 'other' v1 was not applied either
}

TEST_CASE("an edited released migration is refused as checksum drift naming owner and version") {
  auto f = open_fresh("migrate_drift");
  std::vector<store::migration> ms = {mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)"),
                                      mig("alpha", 2, "CREATE TABLE a2 (x BIGINT)")};
  REQUIRE(store::migrate(*f.db, ms).ok());
  ms[1].sql = "CREATE TABLE a2 (x BIGINT, y BIGINT)";
  ms.push_back(mig("alpha", 3, "CREATE TABLE a3 (x BIGINT)"));
  auto r = store::migrate(*f.db, ms);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::corruption);
  CHECK(contains(r.err().message, "'alpha' v2"));
  CHECK(count(*f.db, "schema_migrations") == 2);  // v3 not applied after the refusal
  ms[1].sql = "CREATE TABLE a2 (x BIGINT)";
  ms[1].append_only_tables = {"a2"};  // the append-only list is part of the checksum
  CHECK(store::migrate(*f.db, ms).code() == errc::corruption);
}

TEST_CASE("migration lists with gaps, repeats or odd names are refused before touching the database") {
  auto f = open_fresh("migrate_bad_list");
  std::vector<store::migration> gap = {mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)"),
                                       mig("alpha", 3, "CREATE TABLE a3 (x BIGINT)")};
  auto r = store::migrate(*f.db, gap);
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, "expected version 2, found 3"));
  std::vector<store::migration> repeat = {mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)"),
                                          mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)")};
  CHECK(store::migrate(*f.db, repeat).code() == errc::invalid_argument);
  std::vector<store::migration> odd = {mig("al pha", 1, "CREATE TABLE a1 (x BIGINT)")};
  CHECK(store::migrate(*f.db, odd).code() == errc::invalid_argument);
  auto bad_table = mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)");
  bad_table.append_only_tables = {"a1; DROP TABLE x"};
  CHECK(store::migrate(*f.db, std::vector{bad_table}).code() == errc::invalid_argument);
  auto tables = f.db->with_transaction([](transaction& tx) { return tx.query("SELECT 1 FROM schema_migrations"); });
  CHECK_FALSE(tables.ok());  // not even the bookkeeping table was made
}

TEST_CASE("a migration that fails half way leaves nothing behind and is not recorded") {
  auto f = open_fresh("migrate_fail");
  std::vector<store::migration> ms = {
      mig("alpha", 1, "CREATE TABLE a1 (x BIGINT)"),
      mig("alpha", 2, "CREATE TABLE a2 (x BIGINT); INSERT INTO a1 (x) VALUES (1); INSERT INTO nowhere VALUES (1)"),
  };
  auto r = store::migrate(*f.db, ms);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, "'alpha' v2"));
  CHECK(count(*f.db, "a1") == 0);
  CHECK(count(*f.db, "schema_migrations") == 1);
  auto a2 = f.db->with_transaction([](transaction& tx) { return tx.query("SELECT * FROM a2"); });
  CHECK_FALSE(a2.ok());
}

// ---------------------------------------------------------------- versioning, append-only

namespace {
// Tables shaped like a service's (a versioned roster row, an append-only
// event log), owned by the test: libs/ never depends on a service's schema.
std::span<const store::migration> versioned_tables() {
  static const store::migration all[] = {
      {.owner = "store_suite_nodes",
       .version = 1,
       .description = "a versioned roster table",
       .sql = "CREATE TABLE nodes (id TEXT NOT NULL PRIMARY KEY, service TEXT NOT NULL, zone TEXT NOT NULL, "
              "registered_unix_ns BIGINT NOT NULL, last_seen_unix_ns BIGINT NOT NULL, "
              "draining BIGINT NOT NULL DEFAULT 0, row_version BIGINT NOT NULL DEFAULT 1);"}};
  return all;
}
std::span<const store::migration> append_only_tables() {
  static const store::migration all[] = {
      {.owner = "store_suite_events",
       .version = 1,
       .description = "an append-only event log",
       .sql = "CREATE TABLE audit_events (seq BIGINT NOT NULL PRIMARY KEY, source TEXT NOT NULL, "
              "source_seq BIGINT NOT NULL, unix_ns BIGINT NOT NULL, principal TEXT NOT NULL DEFAULT '', "
              "action TEXT NOT NULL DEFAULT '', decision INTEGER NOT NULL DEFAULT 0, payload BYTEA, "
              "UNIQUE (source, source_seq))",
       .append_only_tables = {"audit_events"}}};
  return all;
}
}  // namespace

TEST_CASE("of two writers racing from one row version exactly one wins and the other gets a conflict naming table and key") {
  auto f = open_fresh("versioned");
  REQUIRE(store::migrate(*f.db, versioned_tables()).ok());
  auto add = f.db->with_transaction([](transaction& tx) {
    return tx.exec("INSERT INTO nodes (id, service, zone, registered_unix_ns, last_seen_unix_ns) "
                   "VALUES ($1, $2, $3, $4, $4)",
                   {"node-7", "trainer", "edge-a", 1000});
  });
  REQUIRE_MESSAGE(add.ok(), why(add));
  auto other = f.another();
  auto read = [](store::database& db) {
    auto v = db.with_transaction([](transaction& tx) -> loom::result<std::int64_t> {
      auto rows = tx.query("SELECT row_version FROM nodes WHERE id = $1", {"node-7"});
      if (!rows.ok()) return rows.err();
      return (*rows)[0].get_i64(0);
    });
    REQUIRE(v.ok());
    return *v;
  };
  const auto seen_a = read(*f.db), seen_b = read(*other);
  REQUIRE(seen_a == 1);
  REQUIRE(seen_b == 1);
  auto write = [](store::database& db, std::int64_t expected, std::int64_t now_ns) {
    return db.with_transaction([&](transaction& tx) {
      return store::update_versioned(tx, "nodes", "id", "node-7", expected, "last_seen_unix_ns = $1, draining = $2",
                                     {now_ns, 1});
    });
  };
  auto a = write(*f.db, seen_a, 2000);
  REQUIRE_MESSAGE(a.ok(), why(a));
  CHECK(*a == 2);
  auto b = write(*other, seen_b, 3000);
  REQUIRE_FALSE(b.ok());
  CHECK(b.code() == errc::conflict);
  CHECK(b.err().message == "nodes 'node-7' changed concurrently: row_version is 2, expected 1");
  auto row = f.db->with_transaction(
      [](transaction& tx) { return tx.query("SELECT last_seen_unix_ns, row_version FROM nodes"); });
  REQUIRE(row.ok());
  CHECK((*row)[0].get_i64(0).value() == 2000);  // the loser wrote nothing
  CHECK((*row)[0].get_i64(1).value() == 2);
  auto retry = write(*other, read(*other), 3000);  // the loser re-reads and wins next
  REQUIRE(retry.ok());
  CHECK(*retry == 3);
}

TEST_CASE("update_versioned on a missing key is not_found and refuses names that are not plain identifiers") {
  auto f = open_fresh("versioned_errors");
  REQUIRE(store::migrate(*f.db, versioned_tables()).ok());
  auto missing = f.db->with_transaction(
      [](transaction& tx) { return store::update_versioned(tx, "nodes", "id", "ghost", 1, ""); });
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message == "nodes 'ghost' not found");
  auto injected = f.db->with_transaction([](transaction& tx) {
    return store::update_versioned(tx, "nodes; DROP TABLE nodes", "id", "x", 1, "");
  });
  CHECK(injected.code() == errc::invalid_argument);
  CHECK(count(*f.db, "nodes") == 0);
}

TEST_CASE("UPDATE and DELETE on an append-only table fail naming the table while INSERT and SELECT work") {
  auto f = open_fresh("append_only");
  auto migrated = store::migrate(*f.db, append_only_tables());
  REQUIRE_MESSAGE(migrated.ok(), why(migrated));
  const store::blob payload{std::string("\x08\x01\0\x02", 4)};
  auto ins = f.db->with_transaction([&](transaction& tx) {
    return tx.exec("INSERT INTO audit_events (seq, source, source_seq, unix_ns, principal, action, decision, payload)"
                   " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                   {1, "scheduler@h1", 1, 123, "alice", "job.submit", 1, payload});
  });
  REQUIRE_MESSAGE(ins.ok(), why(ins));
  auto dup = f.db->with_transaction([&](transaction& tx) {
    return tx.exec("INSERT INTO audit_events (seq, source, source_seq, unix_ns) VALUES ($1, $2, $3, $4)",
                   {2, "scheduler@h1", 1, 124});
  });
  CHECK(dup.code() == errc::already_exists);  // (source, source_seq) is unique

  auto upd = f.db->with_transaction(
      [](transaction& tx) { return tx.exec("UPDATE audit_events SET principal = $1", {"mallory"}); });
  REQUIRE_FALSE(upd.ok());
  CHECK(upd.code() == errc::invalid_argument);
  CHECK(contains(upd.err().message, "audit_events is append-only"));
  auto del = f.db->with_transaction([](transaction& tx) { return tx.exec("DELETE FROM audit_events WHERE seq = 1"); });
  REQUIRE_FALSE(del.ok());
  CHECK(del.code() == errc::invalid_argument);
  CHECK(contains(del.err().message, "audit_events is append-only"));
  if (engine == store::backend::postgres) {
    auto trunc = f.db->with_transaction([](transaction& tx) { return tx.exec("TRUNCATE audit_events"); });
    CHECK(trunc.code() == errc::invalid_argument);
  }
  auto rows = f.db->with_transaction(
      [](transaction& tx) { return tx.query("SELECT principal, payload, decision FROM audit_events"); });
  REQUIRE(rows.ok());
  REQUIRE(rows->size() == 1);
  CHECK((*rows)[0].get_text("principal").value() == "alice");
  CHECK((*rows)[0].get_blob("payload").value() == payload);
  CHECK((*rows)[0].get_i64("decision").value() == 1);
}

// ---------------------------------------------------------------- engine-specific

#if defined(LOOM_STORE_TEST_BACKEND_postgres)

namespace {

std::int64_t backend_pid(store::database& db) {
  auto pid = db.with_transaction([](transaction& tx) -> loom::result<std::int64_t> {
    auto rows = tx.query("SELECT pg_backend_pid()");
    if (!rows.ok()) return rows.err();
    return (*rows)[0].get_i64(0);
  });
  REQUIRE_MESSAGE(pid.ok(), why(pid));
  return *pid;
}

// pg_terminate_backend from a second session, then wait until the backend is gone.
void kill_backend(store::database& admin, std::int64_t pid) {
  auto killed = admin.with_transaction([&](transaction& tx) -> loom::result<std::int64_t> {
    auto rows = tx.query("SELECT pg_terminate_backend(CAST($1 AS INTEGER))", {pid});
    if (!rows.ok()) return rows.err();
    return (*rows)[0].get_i64(0);
  });
  REQUIRE_MESSAGE(killed.ok(), why(killed));
  REQUIRE(*killed == 1);
  for (int i = 0; i < 500; ++i) {
    auto alive = admin.with_transaction([&](transaction& tx) -> loom::result<std::int64_t> {
      auto rows = tx.query("SELECT COUNT(*) FROM pg_stat_activity WHERE pid = CAST($1 AS INTEGER)", {pid});
      if (!rows.ok()) return rows.err();
      return (*rows)[0].get_i64(0);
    });
    REQUIRE(alive.ok());
    if (*alive == 0) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  FAIL("backend " << pid << " still alive 5 s after pg_terminate_backend");
}

}  // namespace

TEST_CASE("PostgreSQL: an unreachable server is unavailable and the message names the URL with the password masked") {
  const std::string url = "postgresql://loom:s3cret-pw@127.0.0.1:1/loomdb";
  auto r = store::database::open(url);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::unavailable);
  CHECK(contains(r.err().message, "postgresql://loom:***@127.0.0.1:1/loomdb"));
  CHECK_FALSE(contains(r.err().message, "s3cret"));
  CHECK(store::mask_url("postgres://u:p@h/db?sslmode=require&password=x2") ==
        "postgres://u:***@h/db?sslmode=require&password=***");
  CHECK(store::mask_url("postgresql://u@h:5432/db") == "postgresql://u@h:5432/db");
  CHECK(store::mask_url("/var/lib/loom/loom.db") == "/var/lib/loom/loom.db");
}

TEST_CASE("PostgreSQL: open_with_retry backs off until the deadline, then reports the attempts") {
  const std::string url = "postgresql://loom:s3cret-pw@127.0.0.1:1/loomdb";
  auto t0 = std::chrono::steady_clock::now();
  auto r = store::database::open_with_retry(url, t0 + std::chrono::milliseconds(700));
  auto took = std::chrono::steady_clock::now() - t0;
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::unavailable);
  // 100 + 200 + 400 ms of sleeps fit in 700 ms: four attempts, the last at the deadline.
  CHECK(contains(r.err().message, "gave up after 4 attempts"));
  CHECK_FALSE(contains(r.err().message, "s3cret"));
  CHECK(took >= std::chrono::milliseconds(700));
  CHECK(took < std::chrono::seconds(3));
  auto f = open_fresh("retry_ok");
  auto good = store::database::open_with_retry(f.scratch.url(), std::chrono::steady_clock::now() + std::chrono::seconds(5));
  CHECK_MESSAGE(good.ok(), why(good));
}

TEST_CASE("PostgreSQL: a connection killed mid-transaction answers unavailable, keeps nothing, and the next transaction reconnects") {
  auto f = open_fresh("lost_mid_tx");
  script(*f.db, "CREATE TABLE t (x TEXT)");
  auto admin = f.another();
  const auto pid = backend_pid(*f.db);
  loom::errc second = errc::ok;
  auto r = f.db->with_transaction([&](transaction& tx) -> loom::status {
    if (auto w = tx.exec("INSERT INTO t (x) VALUES ($1)", {"before the kill"}); !w.ok()) return w.err();
    kill_backend(*admin, pid);
    auto w = tx.exec("INSERT INTO t (x) VALUES ($1)", {"after the kill"});
    second = w.code();
    return w.ok() ? loom::ok_status() : loom::status(w.err());
  });
  REQUIRE_FALSE(r.ok());
  CHECK(second == errc::unavailable);
  CHECK(r.code() == errc::unavailable);
  CHECK(contains(r.err().message, "lost"));
  CHECK(count(*admin, "t") == 0);  // nothing half-written
  auto next = f.db->with_transaction([](transaction& tx) { return tx.exec("INSERT INTO t (x) VALUES ('next')"); });
  REQUIRE_MESSAGE(next.ok(), why(next));
  CHECK(count(*admin, "t") == 1);
  CHECK(backend_pid(*f.db) != pid);
}

TEST_CASE("PostgreSQL: a connection killed while idle is re-established at the next BEGIN and the work succeeds") {
  auto f = open_fresh("lost_idle");
  script(*f.db, "CREATE TABLE t (x BIGINT)");
  auto admin = f.another();
  const auto pid = backend_pid(*f.db);
  kill_backend(*admin, pid);
  auto r = f.db->with_transaction([](transaction& tx) { return tx.exec("INSERT INTO t (x) VALUES (1)"); });
  REQUIRE_MESSAGE(r.ok(), why(r));
  CHECK(count(*admin, "t") == 1);
  CHECK(backend_pid(*f.db) != pid);
}

#else

TEST_CASE("SQLite: a database is opened in WAL mode with synchronous FULL and foreign keys on") {
  auto f = open_fresh("pragmas");
  auto get = [&](const std::string& pragma) {
    auto rows = f.db->with_transaction([&](transaction& tx) { return tx.query("PRAGMA " + pragma); });
    REQUIRE_MESSAGE(rows.ok(), why(rows));
    return (*rows)[0][0];
  };
  CHECK(get("journal_mode") == store::value{"wal"});
  CHECK(get("synchronous") == store::value{2});  // FULL
  CHECK(get("foreign_keys") == store::value{1});
}

TEST_CASE("SQLite: a file in a missing directory is unavailable naming the path, and a non-database file is corruption") {
  auto missing = store::database::open("/nonexistent-loom-dir/x/loom.db");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == errc::unavailable);
  CHECK(contains(missing.err().message, "/nonexistent-loom-dir/x/loom.db"));
  auto s = store::testing::scratch::make(engine, "garbage");
  REQUIRE(s.ok());
  {
    std::ofstream out(s->url(), std::ios::binary);
    out << std::string(8192, 'z');
  }
  auto bad = store::database::open(s->url());
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == errc::corruption);
  CHECK(contains(bad.err().message, s->url()));
}

TEST_CASE("SQLite: a writer waits for another connection's transaction instead of failing") {
  auto f = open_fresh("busy");
  script(*f.db, "CREATE TABLE t (x BIGINT)");
  auto other = f.another();
  loom::status held;
  std::thread holder([&] {
    held = other->with_transaction([](transaction& tx) -> loom::status {
      if (auto w = tx.exec("INSERT INTO t (x) VALUES (1)"); !w.ok()) return w.err();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      return {};
    });
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto r = f.db->with_transaction([](transaction& tx) { return tx.exec("INSERT INTO t (x) VALUES (2)"); });
  holder.join();
  CHECK_MESSAGE(held.ok(), why(held));
  CHECK_MESSAGE(r.ok(), why(r));
  CHECK(count(*f.db, "t") == 2);
}

#endif
