// store_writer: the process the cross-process store tests start, kill and race.
//   store_writer crash URL K PAUSE_AT
//     forever: one transaction inserts K crash_rows and bumps crash_counter;
//     prints "mid T" half way through transaction T; in transaction PAUSE_AT
//     it prints "paused T" half way and sleeps until killed.
//   store_writer race URL TRANSITIONS SEED
//     prints "ready", waits for a line on stdin, then makes TRANSITIONS
//     successful transitions (read a race_rows row in a read transaction,
//     update_versioned it in the next; on conflict re-read and retry) and
//     prints "done SUCCESSES CONFLICTS".
// Exit 0 on success, 2 on any store error (message on stderr).
#include "libs/store/database.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/versioned.hpp"
#include "tests/store/test_schema.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <string>
#include <thread>

namespace store = loom::store;

namespace {

[[noreturn]] void die(const std::string& what, const loom::error& e) {
  std::cerr << "store_writer: " << what << ": " << e.to_string() << std::endl;
  std::exit(2);
}

void say(const std::string& line) {
  std::cout << line << std::endl;  // endl flushes: the test reads line by line
}

int crash(store::database& db, int k, std::int64_t pause_at) {
  const std::string payload(100, 'p');  // ~100 bytes a row: K rows span several pages
  for (;;) {
    auto r = db.with_transaction([&](store::transaction& tx) -> loom::status {
      auto rows = tx.query("SELECT n FROM crash_counter WHERE id = 1");
      if (!rows.ok()) return rows.err();
      const std::int64_t t = (*rows)[0].get_i64(0).value() + 1;
      for (int i = 0; i < k; ++i) {
        auto w = tx.exec("INSERT INTO crash_rows (txn, i, payload) VALUES ($1, $2, $3)", {t, i, payload});
        if (!w.ok()) return w.err();
        if (i == k / 2) {
          if (t == pause_at) {
            say("paused " + std::to_string(t));
            for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
          }
          say("mid " + std::to_string(t));
        }
      }
      auto w = tx.exec("UPDATE crash_counter SET n = $1 WHERE id = 1", {t});
      return w.ok() ? loom::ok_status() : loom::status(w.err());
    });
    if (!r.ok()) die("crash transaction", r.err());
  }
}

int race(store::database& db, int transitions, unsigned seed) {
  say("ready");
  std::string go;
  std::getline(std::cin, go);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(1, loom::store_test::race_row_count);
  std::uniform_int_distribution<int> think(0, 200);
  int successes = 0, conflicts = 0;
  while (successes < transitions) {
    const std::int64_t id = pick(rng);
    auto seen = db.with_read_transaction([&](store::transaction& tx) -> loom::result<std::pair<std::int64_t, std::int64_t>> {
      auto rows = tx.query("SELECT value, row_version FROM race_rows WHERE id = $1", {id});
      if (!rows.ok()) return rows.err();
      return std::pair{(*rows)[0].get_i64(0).value(), (*rows)[0].get_i64(1).value()};
    });
    if (!seen.ok()) die("race read", seen.err());
    auto [value, version] = *seen;
    // Think time between reading and writing, as a state machine deciding the
    // next state has: it lets the other process overtake, so conflicts happen.
    std::this_thread::sleep_for(std::chrono::microseconds(think(rng)));
    auto w = db.with_transaction([&](store::transaction& tx) {
      return store::update_versioned(tx, "race_rows", "id", id, version, "value = $1", {value + 1});
    });
    if (w.ok()) {
      ++successes;
    } else if (w.code() == loom::errc::conflict) {
      ++conflicts;
    } else {
      die("race update", w.err());
    }
  }
  say("done " + std::to_string(successes) + " " + std::to_string(conflicts));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  if (argc != 5 || (mode != "crash" && mode != "race")) {
    std::cerr << "usage: store_writer crash URL K PAUSE_AT | race URL TRANSITIONS SEED\n";
    return 64;
  }
  auto db = store::database::open(argv[2]);
  if (!db.ok()) die("open", db.err());
  if (auto m = store::migrate(**db, loom::store_test::test_migrations()); !m.ok()) die("migrate", m.err());
  if (mode == "crash") return crash(**db, std::atoi(argv[3]), std::atoll(argv[4]));
  return race(**db, std::atoi(argv[3]), static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)));
}
