#include "libs/runtime/denial_merge.hpp"

#include <doctest/doctest.h>

using namespace loom::runtime;
using namespace std::chrono_literals;

namespace {
using clock = denial_merge::clock;
const clock::time_point t0{std::chrono::hours(1000)};

denial stale(std::string rid, std::string principal = "admin") {
  return denial{std::move(principal), "admin", "loom.v1.HealthRequest", "token epoch 0 revoked (current epoch 1)",
                "client", std::move(rid)};
}
}  // namespace

TEST_CASE("a burst of identical denials is one record at once and one summary counting the rest when the window closes") {
  denial_merge m(10s);
  std::uint64_t first = 0;
  CHECK(m.admit(stale("r0"), t0));
  m.opened(stale("r0"), 41);
  int recorded = 0;
  for (int i = 1; i < 300; ++i) {
    std::uint64_t ord = 0;
    recorded += m.admit(stale("r" + std::to_string(i)), t0 + i * 30ms, &ord);  // 9 s of retries
    first = ord;
  }
  CHECK(recorded == 0);
  CHECK(first == 41);  // merged replies wait for the first record
  CHECK(m.due(t0 + 9999ms).empty());
  auto s = m.due(t0 + 10s);
  REQUIRE(s.size() == 1);
  CHECK(s[0].repeats == 299);
  CHECK(s[0].first_request_id == "r1");
  CHECK(s[0].last.request_id == "r299");
  CHECK(s[0].last.reason == stale("x").reason);
  CHECK(s[0].window == 10s);
  CHECK(m.open_windows() == 0);
  // The next one after the window is recorded at once again.
  CHECK(m.admit(stale("r300"), t0 + 10s));
}

TEST_CASE("denials differing in principal, action, reason or peer are never merged") {
  denial_merge m(10s);
  denial base = stale("a");
  auto other = [&](auto change) {
    denial d = base;
    change(d);
    return d;
  };
  CHECK(m.admit(base, t0));
  CHECK(m.admit(other([](denial& d) { d.principal = "bob"; }), t0));
  CHECK(m.admit(other([](denial& d) { d.action = "loom.v1.PingRequest"; }), t0));
  CHECK(m.admit(other([](denial& d) { d.reason = "token expired"; }), t0));
  CHECK(m.admit(other([](denial& d) { d.peer = "trainer"; }), t0));
  CHECK_FALSE(m.admit(other([](denial& d) { d.request_id = "b"; d.role = "viewer"; }), t0 + 1s));
  CHECK(m.open_windows() == 5);
  auto s = m.due(t0 + 11s);
  REQUIRE(s.size() == 1);  // only the window with a repeat owes a summary
  CHECK(s[0].repeats == 1);
  CHECK(s[0].last.principal == "admin");
}

TEST_CASE("flush at stop returns the counts of open windows so no repeat is lost") {
  denial_merge m(10s);
  CHECK(m.admit(stale("a"), t0));
  CHECK_FALSE(m.admit(stale("b"), t0 + 1s));
  CHECK_FALSE(m.admit(stale("c"), t0 + 2s));
  CHECK(m.admit(stale("d", "bob"), t0 + 2s));
  auto s = m.flush();
  REQUIRE(s.size() == 1);
  CHECK(s[0].repeats == 2);
  CHECK(s[0].first_request_id == "b");
  CHECK(m.open_windows() == 0);
  CHECK(m.flush().empty());
}

TEST_CASE("a denial after its window ended but before due() is recorded apart and the owed summary still comes") {
  denial_merge m(10s);
  CHECK(m.admit(stale("a"), t0));
  CHECK_FALSE(m.admit(stale("b"), t0 + 5s));
  CHECK(m.admit(stale("c"), t0 + 10s));  // window over: its own record
  auto s = m.due(t0 + 10s);
  REQUIRE(s.size() == 1);
  CHECK(s[0].repeats == 1);
  CHECK(s[0].last.request_id == "b");
}

TEST_CASE("beyond max_windows distinct denials are recorded one by one, never merged or dropped") {
  denial_merge m(10s, 2);
  CHECK(m.admit(stale("a", "p1"), t0));
  CHECK(m.admit(stale("b", "p2"), t0));
  CHECK(m.admit(stale("c", "p3"), t0));
  CHECK(m.admit(stale("d", "p3"), t0));  // not tracked: recorded again
  CHECK_FALSE(m.admit(stale("e", "p1"), t0));
  CHECK(m.open_windows() == 2);
}

TEST_CASE("identical denials under two tenants are two windows: each tenant's record stays its own") {
  denial_merge m(10s);
  auto a = stale("r1");
  a.tenant = "acme";
  auto b = stale("r2");
  b.tenant = "globex";
  CHECK(m.admit(a, t0));
  CHECK(m.admit(b, t0 + 1ms));
  CHECK(m.open_windows() == 2);
}
