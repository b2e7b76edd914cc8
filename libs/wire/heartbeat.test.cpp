#include "libs/wire/heartbeat.hpp"

#include <doctest/doctest.h>

using namespace loom::wire;
using namespace std::chrono_literals;

namespace {
const steady_time t0 = steady_time{} + 1000s;
}

TEST_CASE("a peer never heard from is not alive") {
  liveness l(1000ms);
  CHECK_FALSE(l.alive(t0));
  CHECK(l.missed(t0) == 3);
}

TEST_CASE("a peer that keeps beating stays alive") {
  liveness l(1000ms);
  for (int i = 0; i < 10; ++i) {
    l.beat(t0 + i * 1000ms);
    CHECK(l.alive(t0 + i * 1000ms + 999ms));
    CHECK(l.missed(t0 + i * 1000ms + 999ms) == 0);
  }
}

TEST_CASE("a peer that misses three heartbeats is dead, and two are tolerated") {
  liveness l(1000ms, 3);
  l.beat(t0);
  CHECK(l.missed(t0 + 1000ms) == 1);
  CHECK(l.alive(t0 + 2999ms));
  CHECK(l.missed(t0 + 2999ms) == 2);
  CHECK_FALSE(l.alive(t0 + 3000ms));
  CHECK(l.missed(t0 + 3000ms) == 3);
  l.beat(t0 + 3500ms);  // it came back
  CHECK(l.alive(t0 + 3500ms));
}

TEST_CASE("a beat observed out of order does not move liveness backwards") {
  liveness l(1000ms);
  l.beat(t0 + 5000ms);
  l.beat(t0);
  CHECK(l.missed(t0 + 5500ms) == 0);
}

TEST_CASE("a heartbeat is due at once, then once per interval") {
  heartbeat_schedule s(1000ms);
  CHECK(s.due(t0));
  CHECK(s.until_due(t0) == 0ms);
  s.sent(t0);
  CHECK_FALSE(s.due(t0 + 999ms));
  CHECK(s.until_due(t0 + 250ms) == 750ms);
  CHECK(s.due(t0 + 1000ms));
}

TEST_CASE("an outage log tells a cut link (silent, on time) from a stopped process (late by the silence)") {
  outage_log log;
  CHECK(log.since_answer(t0).silent == 0ms);  // never answered: nothing to report
  log.answered(t0);
  // A cut link: every wait on time, every call times out within its budget.
  for (int k = 0; k < 4; ++k) {
    log.ran(1000ms, 1000ms);
    log.ran(500ms, 500ms);
  }
  auto cut = log.since_answer(t0 + 6s);
  CHECK(cut.silent == 6s);
  CHECK(cut.late == 0ms);
  log.answered(t0 + 6s);
  CHECK(log.since_answer(t0 + 6s).silent == 0ms);
  // A process stopped 10 s in a wait: that wait ran 10 s past its plan.
  log.ran(11000ms, 1000ms);
  log.ran(200ms, 500ms);
  auto stopped = log.since_answer(t0 + 17s);
  CHECK(stopped.silent == 11s);
  CHECK(stopped.late == 10s);
  log.answered(t0 + 17s);
  CHECK(log.since_answer(t0 + 17s).late == 0ms);  // each silence is judged on its own
}
