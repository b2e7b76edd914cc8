// store_bench: durable state-machine transitions through loom::store.
// A transition reads a row's (value, row_version) and update_versioned()s it;
// it is acknowledged only once its commit is durable. Keys are disjoint per
// client, so no transition conflicts.
//   sqlite:   a temp-dir loom.db, WAL, synchronous=FULL. Reference line: one
//             writer, one commit (one WAL fsync) per transition. Figure: N
//             clients through store::group_commit — every transition queued
//             during a commit shares the next one (SQLite has one write lock,
//             so more connections would only queue).
//   postgres: a throwaway cluster the bench starts itself (port 55449,
//             fsync=on, synchronous_commit=on, full_page_writes=on); N
//             connections, one transaction each per transition; the server
//             flushes concurrent commits together (its own group commit).
// Last lines, one per engine (postgres last), for scripts:
//   case=<sqlite|postgres> transitions_per_s=<..>
// Usage: store_bench [seconds_per_case (default 10)] [clients (default 16)]
// Takes about 2.5 × seconds_per_case + 5 s.
#include "bench/bench_util.hpp"
#include "libs/store/database.hpp"
#include "libs/store/group_commit.hpp"
#include "libs/store/migrate.hpp"
#include "libs/store/testing.hpp"
#include "libs/store/versioned.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

using loom::bench::loadavg;

namespace {

namespace store = loom::store;
using clk = std::chrono::steady_clock;

constexpr int rows = 1024;            // keys the writers cycle through
constexpr int postgres_port = 55449;  // not the tests' 55439: the bench can run beside ctest

struct outcome {
  long transitions = 0;
  double seconds = 0, p50_us = 0, p99_us = 0;
  double per_s() const { return seconds > 0 ? transitions / seconds : 0; }
};

bool cluster_up = false;  // stop it on every exit path, including fail()

void stop_cluster_at_exit() {
  if (cluster_up) (void)store::testing::stop_cluster(postgres_port);
}

[[noreturn]] void fail(const std::string& what, const loom::error& e) {
  std::fprintf(stderr, "store_bench: %s: %s\n", what.c_str(), e.to_string().c_str());
  std::exit(1);
}

const store::migration schema[] = {
    {.owner = "store_bench",
     .version = 1,
     .description = "bench_rows",
     .sql = "CREATE TABLE bench_rows (id BIGINT NOT NULL PRIMARY KEY, value BIGINT NOT NULL, "
            "row_version BIGINT NOT NULL)"},
};

void prepare(const std::string& url) {
  auto db = store::database::open(url);
  if (!db.ok()) fail("open " + store::mask_url(url), db.err());
  if (auto m = store::migrate(**db, schema); !m.ok()) fail("migrate", m.err());
  auto filled = (*db)->with_transaction([](store::transaction& tx) -> loom::status {
    for (int id = 0; id < rows; ++id) {
      auto w = tx.exec("INSERT INTO bench_rows (id, value, row_version) VALUES ($1, 0, 1)", {id});
      if (!w.ok()) return w.err();
    }
    return {};
  });
  if (!filled.ok()) fail("fill", filled.err());
}

// The transition on row `id`: read (value, row_version), write value + 1 at
// row_version + 1. Returns the new version.
loom::result<std::int64_t> transition(store::transaction& tx, std::int64_t id) {
  auto got = tx.query("SELECT value, row_version FROM bench_rows WHERE id = $1", {id});
  if (!got.ok()) return got.err();
  auto value = (*got)[0].get_i64(0), version = (*got)[0].get_i64(1);
  if (!value.ok() || !version.ok()) return loom::make_error(loom::errc::internal, "bad row");
  return store::update_versioned(tx, "bench_rows", "id", id, *version, "value = $1", {*value + 1});
}

// `clients` threads call step(client, id) on ids client, client + clients, …
// (disjoint, so no conflicts) for `how_long`; every step must succeed.
outcome drive(int clients, std::chrono::seconds how_long,
              const std::function<loom::status(int, std::int64_t)>& step) {
  std::atomic<bool> stop{false};
  std::vector<std::vector<double>> lat(clients);
  std::vector<std::thread> threads;
  auto t0 = clk::now();
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      for (long n = 0; !stop; ++n) {
        auto s0 = clk::now();
        if (auto r = step(c, (c + n * clients) % rows); !r.ok()) fail("transition", r.err());
        lat[c].push_back(std::chrono::duration<double, std::micro>(clk::now() - s0).count());
      }
    });
  }
  std::this_thread::sleep_for(how_long);
  stop = true;
  for (auto& t : threads) t.join();
  outcome o;
  o.seconds = std::chrono::duration<double>(clk::now() - t0).count();
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  o.transitions = static_cast<long>(all.size());
  std::sort(all.begin(), all.end());
  if (!all.empty()) {
    o.p50_us = all[all.size() / 2];
    o.p99_us = all[std::min(all.size() - 1, all.size() * 99 / 100)];
  }
  return o;
}

std::unique_ptr<store::database> open(const std::string& url) {
  auto db = store::database::open(url);
  if (!db.ok()) fail("open " + store::mask_url(url), db.err());
  return std::move(*db);
}

// Each client its own connection; every transition its own transaction.
outcome run_direct(const std::string& url, int clients, std::chrono::seconds how_long) {
  std::vector<std::unique_ptr<store::database>> dbs;
  for (int i = 0; i < clients; ++i) dbs.push_back(open(url));
  return drive(clients, how_long, [&](int c, std::int64_t id) -> loom::status {
    auto r = dbs[c]->with_transaction([&](store::transaction& tx) { return transition(tx, id); });
    return r.ok() ? loom::ok_status() : loom::status(r.err());
  });
}

// Clients hand transitions to one group_commit; each waits for its durable commit.
outcome run_grouped(const std::string& url, int clients, std::chrono::seconds how_long, double& per_commit) {
  store::group_commit gc(open(url));
  auto o = drive(clients, how_long, [&](int, std::int64_t id) -> loom::status {
    auto r = gc.run([&](store::transaction& tx) { return transition(tx, id); });
    return r.ok() ? loom::ok_status() : loom::status(r.err());
  });
  per_commit = gc.commits() > 0 ? static_cast<double>(gc.units()) / gc.commits() : 0;
  return o;
}

// The final versions must account for every acknowledged transition so far.
void check_total(const std::string& url, long expected) {
  auto sum = open(url)->with_read_transaction([](store::transaction& tx) -> loom::result<std::int64_t> {
    auto r = tx.query("SELECT SUM(row_version - 1) FROM bench_rows");
    if (!r.ok()) return r.err();
    return (*r)[0].get_i64(0);
  });
  if (!sum.ok()) fail("check", sum.err());
  if (*sum != expected) {
    std::fprintf(stderr, "store_bench: %ld transitions acknowledged but %lld recorded\n", expected,
                 static_cast<long long>(*sum));
    std::exit(1);
  }
}

void report(const std::string& how, const outcome& o) {
  std::printf("# %s: %.1f s, %ld transitions = %.0f/s, latency p50 %.0f us, p99 %.0f us\n", how.c_str(), o.seconds,
              o.transitions, o.per_s(), o.p50_us, o.p99_us);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const auto seconds = std::chrono::seconds(argc > 1 ? std::max(1, std::atoi(argv[1])) : 10);
  const int clients = argc > 2 ? std::max(1, std::atoi(argv[2])) : 16;
  std::printf("# store_bench: transition = read row_version + update_versioned, acknowledged after a durable commit\n");
  std::printf("# loadavg %s\n", loadavg().c_str());

  char tmpl[] = "/tmp/loom-store-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) {
    std::perror("mkdtemp");
    return 1;
  }
  const std::string dir = tmpl;
  const std::string sqlite_url = dir + "/loom.db";
  prepare(sqlite_url);
  std::printf("# sqlite: %s (WAL, synchronous=FULL)\n", sqlite_url.c_str());
  // Reference: one writer, one commit (one fsync) per transition.
  const outcome single = run_direct(sqlite_url, 1, seconds / 2);
  report("sqlite, 1 writer, one commit per transition", single);
  double per_commit = 0;
  const outcome lite = run_grouped(sqlite_url, clients, seconds, per_commit);
  report("sqlite, " + std::to_string(clients) + " clients through group_commit (" +
             std::to_string(static_cast<int>(per_commit + 0.5)) + " transitions per commit)",
         lite);
  check_total(sqlite_url, single.transitions + lite.transitions);
  std::filesystem::remove_all(dir);

  std::atexit(stop_cluster_at_exit);
  if (auto s = store::testing::start_cluster(postgres_port, /*durable=*/true); !s.ok()) fail("start postgres", s.err());
  cluster_up = true;
  const std::string pg_url = store::testing::cluster_url(postgres_port);
  prepare(pg_url);
  std::printf("# postgres: %s (fsync=on, synchronous_commit=on)\n", pg_url.c_str());
  const outcome pg = run_direct(pg_url, clients, seconds);
  report("postgres, " + std::to_string(clients) + " connections, one commit per transition (server group commit)", pg);
  check_total(pg_url, pg.transitions);

  std::printf("case=sqlite transitions_per_s=%.0f\n", lite.per_s());
  std::printf("case=postgres transitions_per_s=%.0f\n", pg.per_s());
  return 0;
}
