// leadership on an SQLite file: takes a free lease, is deposed by a takeover
// (steps down, the fence goes to 0), takes an expired lease back at a higher
// epoch, and hands the lease over when stopped.
#include "libs/runtime/leadership.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"
#include "libs/store/lease.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

using namespace loom;
using namespace std::chrono_literals;

namespace {
template <class P>
bool eventually(P pred, std::chrono::milliseconds limit = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}
}  // namespace

TEST_CASE("a replica leads under a free lease, steps down when deposed, takes an expired lease back, and hands it over when stopped") {
  files::temp_dir dir("loom-leadership");
  const std::string url = dir.path() + "/loom.db";
  std::mutex mu;
  std::vector<std::pair<bool, std::int64_t>> changes;
  runtime::leadership_options o;
  o.service = "scheduler";
  o.node_id = "scheduler@test";
  o.endpoint = "tcp://127.0.0.1:7001";
  o.database_url = url;
  o.ttl = 200ms;
  o.renew = 20ms;
  o.poll = 10ms;
  auto l = runtime::leadership::start(o, [&](bool leading, std::int64_t epoch) {
    std::lock_guard lock(mu);
    changes.emplace_back(leading, epoch);
  });
  REQUIRE_MESSAGE(l.ok(), (l.ok() ? "" : l.err().to_string()));
  auto& me = **l;
  REQUIRE(eventually([&] { return me.leading(); }));
  CHECK(me.epoch() == 1);
  CHECK(store::fence_epoch() == 1);
  CHECK(store::fence_service() == "scheduler");
  auto v = me.snapshot();
  CHECK(v.leading);
  CHECK(v.takeovers == 1);

  // Another replica takes over (as a takeover would write it): the renewal is refused.
  auto other = store::database::open(url);
  REQUIRE(other.ok());
  (*other)->set_fenced(false);
  auto forged = (*other)->with_transaction([](store::transaction& tx) -> status {
    auto r = tx.exec("UPDATE loom_leases SET holder = 'scheduler-2@test#x', epoch = 2 WHERE service = 'scheduler'");
    if (!r) return r.err();
    r = tx.exec("UPDATE loom_lease_expiry SET holder = 'scheduler-2@test#x', epoch = 2, expires_ms = 9000000000000 "
                "WHERE service = 'scheduler'");
    if (!r) return r.err();
    return ok_status();
  });
  REQUIRE(forged.ok());
  REQUIRE(eventually([&] { return !me.leading(); }));
  CHECK(me.epoch() == 0);
  CHECK(store::fence_epoch() == 0);
  CHECK(me.snapshot().last_error.find("deposed") != std::string::npos);
  REQUIRE(eventually([&] { return me.snapshot().leader == "scheduler-2@test"; }));

  // That replica's lease runs out: this one takes it at the next epoch.
  auto expire = (*other)->with_transaction([](store::transaction& tx) -> status {
    auto r = tx.exec("UPDATE loom_lease_expiry SET expires_ms = 0 WHERE service = 'scheduler'");
    if (!r) return r.err();
    return ok_status();
  });
  REQUIRE(expire.ok());
  REQUIRE(eventually([&] { return me.leading(); }));
  CHECK(me.epoch() == 3);
  CHECK(store::fence_epoch() == 3);
  // leading() turns true just before the callback runs: wait for the callback too.
  REQUIRE(eventually([&] {
    std::lock_guard lock(mu);
    return changes.size() >= 3;
  }));
  {
    std::lock_guard lock(mu);
    REQUIRE(changes.size() == 3);
    CHECK(changes[0] == std::pair<bool, std::int64_t>{true, 1});
    CHECK(changes[1].first == false);
    CHECK(changes[2] == std::pair<bool, std::int64_t>{true, 3});
  }
  // Stopping hands the lease over: it has run out at once.
  l->reset();
  auto after = store::read_lease(**other, "scheduler");
  REQUIRE(after.ok());
  REQUIRE(after->has_value());
  CHECK(!(*after)->live());
  CHECK(store::fence_epoch() == 0);
  store::clear_write_fence();
}
