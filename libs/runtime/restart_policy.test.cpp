#include "libs/runtime/restart_policy.hpp"

#include <doctest/doctest.h>

using loom::runtime::restart_policy;
using verdict = restart_policy::verdict;
using namespace std::chrono_literals;

namespace {
const restart_policy::clock::time_point t0{};  // injected time: never the real clock
}

TEST_CASE("five crashes inside the window are restarted and the sixth escalates") {
  restart_policy p{5, 60s};
  for (int i = 0; i < 5; ++i) CHECK(p.on_crash(t0 + i * 1s) == verdict::restart);
  CHECK(p.crashes_in_window(t0 + 5s) == 5);
  CHECK(p.on_crash(t0 + 5s) == verdict::escalate);
  CHECK(p.total_restarts() == 5);
}

TEST_CASE("crashes spread wider than the window never escalate") {
  restart_policy p{5, 60s};
  for (int i = 0; i < 100; ++i) CHECK(p.on_crash(t0 + i * 13s) == verdict::restart);  // <= 5 per 60 s
  CHECK(p.total_restarts() == 100);
  CHECK(p.crashes_in_window(t0 + 99 * 13s) == 5);
}

TEST_CASE("a crash leaves the window exactly one window length later") {
  restart_policy p{1, 10s};
  CHECK(p.on_crash(t0) == verdict::restart);
  CHECK(p.crashes_in_window(t0 + 9999ms) == 1);
  CHECK(p.crashes_in_window(t0 + 10s) == 0);
  CHECK(p.on_crash(t0 + 10s) == verdict::restart);
  CHECK(p.on_crash(t0 + 11s) == verdict::escalate);
}

TEST_CASE("max_restarts zero escalates on the first crash") {
  restart_policy p{0, 1s};
  CHECK(p.on_crash(t0) == verdict::escalate);
  CHECK(p.total_restarts() == 0);
}
