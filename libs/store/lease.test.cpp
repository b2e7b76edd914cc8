// Leases and the write fence (lease.hpp), on both engines: part of the store
// suite (store_sqlite_tests, store_postgres_tests).
#include "libs/store/lease.hpp"
#include "libs/store/testing.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace store = loom::store;
using loom::errc;
using namespace std::chrono_literals;

namespace {

constexpr store::backend engine = store::testing::suite_backend;

template <class R>
std::string why(const R& r) {
  return r.ok() ? std::string() : r.err().to_string();
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

struct leased {
  store::testing::scratch scratch;
  std::unique_ptr<store::database> db;  // the lease's own connection (unfenced)
  std::unique_ptr<store::database> open() const {
    auto d = store::database::open(scratch.url());
    REQUIRE_MESSAGE(d.ok(), why(d));
    return std::move(*d);
  }
};

leased make(const std::string& name) {
  auto s = store::testing::scratch::make(engine, name);
  REQUIRE_MESSAGE(s.ok(), why(s));
  auto d = store::database::open(s->url());
  REQUIRE_MESSAGE(d.ok(), why(d));
  auto st = store::ensure_lease_table(**d);
  REQUIRE_MESSAGE(st.ok(), why(st));
  auto t = (*d)->with_transaction(
      [](store::transaction& tx) { return tx.exec_script("CREATE TABLE jobs (id TEXT NOT NULL PRIMARY KEY)"); });
  REQUIRE_MESSAGE(t.ok(), why(t));
  return leased{std::move(*s), std::move(*d)};
}

// Waits (bounded) until `service`'s lease has expired on the store's clock.
void wait_expired(store::database& db, const std::string& service) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    auto l = store::read_lease(db, service);
    REQUIRE_MESSAGE(l.ok(), why(l));
    if (!*l || !(*l)->live()) return;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(std::chrono::milliseconds(std::max<std::int64_t>(1, (*l)->left_ms())));
  }
}

loom::status insert_job(store::database& db, const std::string& id) {
  return db.with_transaction([&](store::transaction& tx) -> loom::status {
    auto r = tx.exec("INSERT INTO jobs (id) VALUES ($1)", {store::value(id)});
    if (!r) return r.err();
    return loom::ok_status();
  });
}

std::int64_t jobs(store::database& db) {
  auto n = db.with_read_transaction([](store::transaction& tx) -> loom::result<std::int64_t> {
    auto rows = tx.query("SELECT COUNT(*) FROM jobs");
    if (!rows) return rows.err();
    return (*rows)[0].get_i64(0);
  });
  REQUIRE_MESSAGE(n.ok(), why(n));
  return *n;
}

struct fence_guard {
  explicit fence_guard(const std::string& s) { store::set_write_fence(s); }
  ~fence_guard() { store::clear_write_fence(); }
};

}  // namespace

TEST_CASE("the first holder takes a lease at epoch 1, renews it in place, and a second sees it as a standby") {
  auto l = make("lease_first");
  auto a = store::acquire_lease(*l.db, "scheduler", "a#1", "tcp://10.0.0.1:7001", 5s);
  REQUIRE_MESSAGE(a.ok(), why(a));
  CHECK(a->holder == "a#1");
  CHECK(a->epoch == 1);
  CHECK(a->live());
  auto b = store::acquire_lease(*l.db, "scheduler", "b#1", "tcp://10.0.0.2:7001", 5s);
  REQUIRE_MESSAGE(b.ok(), why(b));
  CHECK(b->holder == "a#1");  // not taken: a standby learns who leads and where
  CHECK(b->endpoint == "tcp://10.0.0.1:7001");
  CHECK(b->epoch == 1);
  auto again = store::acquire_lease(*l.db, "scheduler", "a#1", "tcp://10.0.0.1:7001", 5s);
  REQUIRE(again.ok());
  CHECK(again->epoch == 1);
  auto r = store::renew_lease(*l.db, "scheduler", "a#1", 1, 5s);
  REQUIRE_MESSAGE(r.ok(), why(r));
  CHECK(r->expires_ms >= a->expires_ms);
  auto read = store::read_lease(*l.db, "scheduler");
  REQUIRE(read.ok());
  REQUIRE(read->has_value());
  CHECK((*read)->holder == "a#1");
  auto none = store::read_lease(*l.db, "aggregator");
  REQUIRE(none.ok());
  CHECK(!none->has_value());
  CHECK(!store::acquire_lease(*l.db, "", "x", "", 1s).ok());
}

TEST_CASE("an expired lease goes to the next holder at epoch + 1 and the deposed holder's renewal is refused") {
  auto l = make("lease_takeover");
  auto a = store::acquire_lease(*l.db, "scheduler", "a#1", "tcp://a:1", 50ms);
  REQUIRE(a.ok());
  wait_expired(*l.db, "scheduler");
  auto b = store::acquire_lease(*l.db, "scheduler", "b#1", "tcp://b:1", 5s);
  REQUIRE_MESSAGE(b.ok(), why(b));
  CHECK(b->holder == "b#1");
  CHECK(b->epoch == 2);
  auto ra = store::renew_lease(*l.db, "scheduler", "a#1", 1, 5s);
  REQUIRE(!ra.ok());
  CHECK(ra.code() == errc::permission_denied);
  CHECK(contains(ra.err().message, "deposed"));
  CHECK(contains(ra.err().message, "b#1 at epoch 2"));
  // A restarted process is a new incarnation: its old name does not inherit the epoch.
  auto ra2 = store::renew_lease(*l.db, "scheduler", "b#1", 1, 5s);
  CHECK(ra2.code() == errc::permission_denied);
  // A clean step-down hands over at once.
  REQUIRE(store::release_lease(*l.db, "scheduler", "b#1", 2).ok());
  auto c = store::acquire_lease(*l.db, "scheduler", "c#1", "tcp://c:1", 5s);
  REQUIRE(c.ok());
  CHECK(c->holder == "c#1");
  CHECK(c->epoch == 3);
}

TEST_CASE("the write fence lets only the lease's epoch write: standbys and deposed leaders are refused and write nothing") {
  auto l = make("lease_fence");
  fence_guard fence("scheduler");
  auto writer = l.open();  // a service's connection: fenced by default
  // No lease yet: nobody writes.
  auto none = insert_job(*writer, "j0");
  REQUIRE(!none.ok());
  CHECK(none.code() == errc::permission_denied);
  CHECK(contains(none.err().message, "has no lease"));

  auto a = store::acquire_lease(*l.db, "scheduler", "a#1", "tcp://a:1", 50ms);
  REQUIRE(a.ok());
  // Standby (fence epoch 0): refused, naming who leads.
  auto standby = insert_job(*writer, "j1");
  REQUIRE(!standby.ok());
  CHECK(standby.code() == errc::permission_denied);
  CHECK(contains(standby.err().message, "standby"));
  CHECK(contains(standby.err().message, "a#1 leads at epoch 1"));
  // Leader: writes.
  store::set_fence_epoch(a->epoch);
  REQUIRE_MESSAGE(insert_job(*writer, "j2").ok(), "leader write");
  // Taken over: the old leader's next write is refused and nothing of it is kept.
  wait_expired(*l.db, "scheduler");
  auto b = store::acquire_lease(*l.db, "scheduler", "b#1", "tcp://b:1", 5s);
  REQUIRE(b.ok());
  REQUIRE(b->epoch == 2);
  auto deposed = insert_job(*writer, "j3");
  REQUIRE(!deposed.ok());
  CHECK(deposed.code() == errc::permission_denied);
  CHECK(contains(deposed.err().message, "epoch 1 was deposed"));
  CHECK(contains(deposed.err().message, "b#1 leads at epoch 2"));
  // A forged epoch (ahead of the store's) is refused as well.
  store::set_fence_epoch(7);
  CHECK(insert_job(*writer, "j4").code() == errc::permission_denied);
  // Reads are never fenced; an unfenced connection (the lease's) still writes.
  CHECK(jobs(*writer) == 1);
  l.db->set_fenced(false);
  REQUIRE(insert_job(*l.db, "j5").ok());
  store::set_fence_epoch(2);
  REQUIRE(insert_job(*writer, "j6").ok());
  CHECK(jobs(*writer) == 3);
}

TEST_CASE("replicas racing for an expired lease: exactly one wins each epoch") {
  auto l = make("lease_race");
  REQUIRE(store::acquire_lease(*l.db, "scheduler", "first", "tcp://f:1", 20ms).ok());
  wait_expired(*l.db, "scheduler");
  constexpr int n = 4;
  std::vector<std::unique_ptr<store::database>> dbs;
  for (int i = 0; i < n; ++i) dbs.push_back(l.open());
  std::atomic<int> won{0}, lost{0}, failed{0};
  std::vector<std::thread> ts;
  for (int i = 0; i < n; ++i)
    ts.emplace_back([&, i] {
      const std::string me = "r" + std::to_string(i);
      // SQLite: a contender that meets another's write may get busy/conflict; it retries (bounded).
      for (int attempt = 0; attempt < 50; ++attempt) {
        auto got = store::acquire_lease(*dbs[i], "scheduler", me, "tcp://r:1", 5s);
        if (!got.ok()) continue;
        (got->holder == me ? won : lost)++;
        return;
      }
      failed++;
    });
  for (auto& t : ts) t.join();
  CHECK(won == 1);
  CHECK(lost == n - 1);
  CHECK(failed == 0);
  auto final_lease = store::read_lease(*l.db, "scheduler");
  REQUIRE(final_lease.ok());
  CHECK((*final_lease)->epoch == 2);
}
