// Test support for the store suites of libs/auditchain (tamper.test.cpp,
// writer.test.cpp): a scratch database of the suite's engine with the audit
// tables (append-only, as in production), a keyring, an anchor signing key
// and an anchor file in a temp dir, and a chain_writer fed from a seeded
// event_source under an injected clock. Keeps every row it wrote.
// Single-threaded; header-only.
#pragma once

#include "libs/auditchain/test_support.hpp"
#include "libs/auditchain/writer.hpp"
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <random>

namespace loom::auditchain::testing {

namespace store = loom::store;
inline constexpr store::backend engine = store::testing::suite_backend;
inline const sys_time clock_start = std::chrono::sys_days{std::chrono::year{2024} / 3 / 1};

inline std::int64_t unix_ns_of(sys_time t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}

// What an attacker with raw database access runs first: the append-only
// triggers (libs/store/migrate.cpp names them) are no protection against
// the database's owner, which is why the chain exists.
inline std::string drop_append_only_sql(store::backend b, const std::string& t) {
  if (b == store::backend::sqlite)
    return "DROP TRIGGER " + t + "_append_only_update; DROP TRIGGER " + t + "_append_only_delete;";
  return "DROP TRIGGER " + t + "_append_only ON " + t + "; DROP TRIGGER " + t + "_append_only_truncate ON " + t + ";";
}

struct chain_fixture {
  loom::files::temp_dir dir{"auditchain"};
  std::optional<store::testing::scratch> scratch;
  std::unique_ptr<store::database> db;
  std::unique_ptr<keyring> keys;
  std::optional<anchor_signer> signer;
  std::unique_ptr<anchor_file> file;
  anchor_keys trusted;
  std::unique_ptr<chain_writer> writer;
  anchor_policy policy;
  std::vector<chain_row> rows;          // as inserted, rows[i].seq == i + 1
  std::vector<std::string> plaintexts;  // rows[i]'s payload before sealing
  sys_time clock = clock_start;

  std::string keys_dir() const { return dir.path() + "/keys"; }
  std::string anchor_path() const { return dir.path() + "/anchors.log"; }

  explicit chain_fixture(const std::string& name, anchor_policy p = {}) : policy(p) {
    auto s = store::testing::scratch::make(engine, name);
    REQUIRE_MESSAGE(s.ok(), why(s));
    scratch.emplace(std::move(*s));
    auto d = store::database::open(scratch->url());
    REQUIRE_MESSAGE(d.ok(), why(d));
    db = std::move(*d);
    const store::migration m{.owner = "auditchain_test", .version = 1, .description = "audit chain tables",
                             .sql = schema_sql(engine), .sql_sqlite = {}, .sql_postgres = {},
                             .append_only_tables = {"audit_events", "audit_checkpoints"}};
    auto mig = store::migrate(*db, std::span<const store::migration>(&m, 1));
    REQUIRE_MESSAGE(mig.ok(), why(mig));
    auto k = keyring::open(keys_dir(), {}, clock);
    REQUIRE_MESSAGE(k.ok(), why(k));
    keys = std::move(*k);
    auto sg = anchor_signer::generate(keys_dir());
    REQUIRE_MESSAGE(sg.ok(), why(sg));
    signer.emplace(std::move(*sg));
    REQUIRE(trusted.add(signer->public_key()).ok());
    reopen_writer();
    REQUIRE(anchor_genesis(*file, *signer, clock).ok());  // as the audit service does for a new key
  }

  void reopen_writer() {
    writer.reset();
    file.reset();
    auto f = anchor_file::open(anchor_path());
    REQUIRE_MESSAGE(f.ok(), why(f));
    file = std::move(*f);
    auto w = chain_writer::open(*db, writer_parts{keys.get(), &*signer, file.get(), policy, {}}, clock);
    REQUIRE_MESSAGE(w.ok(), why(w));
    writer = std::move(*w);
  }

  // Appends n events in committed batches of 1..max_batch rows, the clock
  // moving 0..max_step per event; each batch ends with a checkpoint when due,
  // as the audit service does.
  void append(std::size_t n, event_source& ev, std::mt19937_64& rng, std::size_t max_batch = 32,
              std::chrono::milliseconds max_step = std::chrono::milliseconds(400)) {
    std::size_t done = 0;
    while (done < n) {
      const std::size_t batch = std::min<std::size_t>(n - done, 1 + rng() % max_batch);
      std::vector<chain_row> made;
      std::vector<std::string> pts;
      auto r = db->with_transaction([&](store::transaction& tx) -> status {
        for (std::size_t i = 0; i < batch; ++i) {
          clock += std::chrono::milliseconds(rng() % (max_step.count() + 1));
          auto [row, pt] = ev.next(unix_ns_of(clock));
          auto a = writer->append(tx, std::move(row), pt, clock);
          if (!a) return a.err();
          made.push_back(std::move(*a));
          pts.push_back(std::move(pt));
        }
        auto c = writer->checkpoint_if_due(tx, clock);
        if (!c) return c.err();
        return ok_status();
      });
      REQUIRE_MESSAGE(r.ok(), why(r));
      auto filed = writer->committed();
      REQUIRE_MESSAGE(filed.ok(), why(filed));
      rows.insert(rows.end(), made.begin(), made.end());
      plaintexts.insert(plaintexts.end(), pts.begin(), pts.end());
      done += batch;
    }
  }

  // A checkpoint in a transaction of its own (the service's 60 s timer).
  void checkpoint_if_due(bool force) {
    auto c = db->with_transaction([&](store::transaction& tx) { return writer->checkpoint_if_due(tx, clock, force); });
    REQUIRE_MESSAGE(c.ok(), why(c));
    auto filed = writer->committed();
    REQUIRE_MESSAGE(filed.ok(), why(filed));
  }

  // The anchor file's checkpoints of the chain (its genesis line left out).
  std::vector<checkpoint> external() const {
    auto f = read_anchor_file(anchor_path());
    REQUIRE_MESSAGE(f.ok(), why(f));
    REQUIRE(!f->checkpoints.empty());
    CHECK(f->checkpoints.front().seq == 0);
    return {f->checkpoints.begin() + 1, f->checkpoints.end()};
  }

  verify_report verify_all(std::uint64_t from = 1) {
    verify_options o;
    o.from_seq = from;
    o.keys_dir = keys_dir();
    o.anchor_file = anchor_path();
    auto rep = verify_store(*db, o);
    REQUIRE_MESSAGE(rep.ok(), why(rep));
    return *rep;
  }
};

}  // namespace loom::auditchain::testing
