#include "libs/hpo/asha.hpp"
#include "libs/hpo/worker_sim.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace loom;
using namespace loom::hpo;

namespace {

std::vector<trial_config> trials(int n) {
  std::vector<trial_config> t(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) t[std::size_t(i)].values.push_back({"optim.lr", 1e-3 * (i + 1), false});
  return t;
}

asha make(std::int64_t r, std::int64_t R, int n, bool finish_best = true) {
  auto a = asha::make({r, R, 3, finish_best}, trials(n));
  REQUIRE(a.ok());
  return std::move(*a);
}

// Curves that never cross: trial t's loss at step s is floor[t] + 1/s.
double curve(const std::vector<double>& floor, int t, std::int64_t s) { return floor[std::size_t(t)] + 1.0 / double(s); }

void expect(const suggestion& s, suggestion::kind what, int trial, std::int64_t from, std::int64_t to) {
  CHECK(s.what == what);
  CHECK(s.trial == trial);
  CHECK(s.from_step == from);
  CHECK(s.to_step == to);
}

}  // namespace

TEST_CASE("rungs are R divided by powers of eta, the first at least min_steps") {
  CHECK(make(30, 300, 1).rungs() == std::vector<std::int64_t>{33, 100, 300});
  CHECK(make(1, 81, 1).rungs() == std::vector<std::int64_t>{1, 3, 9, 27, 81});
  CHECK(make(50, 100, 1).rungs() == std::vector<std::int64_t>{100});
  CHECK(asha::make({0, 10, 3, true}, trials(1)).code() == errc::invalid_argument);
  CHECK(asha::make({10, 5, 3, true}, trials(1)).code() == errc::invalid_argument);
  CHECK(asha::make({1, 9, 1, true}, trials(1)).code() == errc::invalid_argument);
  CHECK(asha::make({1, 9, 3, true}, {}).code() == errc::invalid_argument);
}

TEST_CASE("a trial in the top third of its rung is promoted at once, the others stop, and the best is finished to R") {
  asha a = make(1, 9, 4);  // rungs 1, 3, 9
  const std::vector<double> floor{0.5, 0.4, 0.3, 0.6};
  expect(a.suggest(), suggestion::kind::start, 0, 0, 1);
  REQUIRE(a.report(0, 1, curve(floor, 0, 1)).ok());
  CHECK(a.next_action(0) == action::stop);  // 1 at the rung: the top third is nobody
  expect(a.suggest(), suggestion::kind::start, 1, 0, 1);
  REQUIRE(a.report(1, 1, curve(floor, 1, 1)).ok());
  CHECK(a.next_action(1) == action::stop);
  expect(a.suggest(), suggestion::kind::start, 2, 0, 1);
  REQUIRE(a.report(2, 1, curve(floor, 2, 1)).ok());
  CHECK(a.next_action(2) == action::promote);  // best of 3: floor(3/3) = 1 goes on
  REQUIRE(a.report(2, 3, curve(floor, 2, 3)).ok());
  CHECK(a.next_action(2) == action::stop);  // alone at rung 1
  expect(a.suggest(), suggestion::kind::start, 3, 0, 1);
  REQUIRE(a.report(3, 1, curve(floor, 3, 1)).ok());
  CHECK(a.next_action(3) == action::stop);  // 4 at rung 0, quota 1: trial 2 holds it
  // Nothing runs, nothing is promotable, no trial reached R: the best of the
  // highest rung (trial 2 at rung 1) is finished.
  expect(a.suggest(), suggestion::kind::resume, 2, 3, 9);
  REQUIRE(a.report(2, 9, curve(floor, 2, 9)).ok());
  CHECK(a.next_action(2) == action::complete);
  CHECK(a.suggest().what == suggestion::kind::done);
  CHECK(a.done());
  CHECK(a.best_trial() == 2);
  CHECK(a.rung_of(2) == 2);
  CHECK(a.steps_granted() == 4 * 1 + 2 + 6);
}

TEST_CASE("without finish_best the search ends with its best at the highest rung reached") {
  asha a = make(1, 9, 4, false);
  const std::vector<double> floor{0.5, 0.4, 0.3, 0.6};
  for (int t = 0; t < 4; ++t) {
    auto s = a.suggest();
    REQUIRE(s.trial == t);
    REQUIRE(a.report(t, 1, curve(floor, t, 1)).ok());
    if (a.next_action(t) == action::promote) REQUIRE(a.report(t, 3, curve(floor, t, 3)).ok());
  }
  CHECK(a.suggest().what == suggestion::kind::done);
  CHECK(a.best_trial() == 2);
  CHECK(a.rung_of(2) == 1);
  CHECK(a.loss_of(2) == doctest::Approx(0.3 + 1.0 / 3));
}

TEST_CASE("a stopped trial is promoted later when enough trials reach its rung behind it") {
  asha a = make(1, 9, 6);
  const std::vector<double> floor{0.1, 0.5, 0.6, 0.7, 0.8, 0.9};
  for (int t = 0; t < 3; ++t) {
    expect(a.suggest(), suggestion::kind::start, t, 0, 1);
    REQUIRE(a.report(t, 1, curve(floor, t, 1)).ok());
    CHECK(a.next_action(t) == action::stop);  // trial 2 is third of 3: not in the top third
  }
  expect(a.suggest(), suggestion::kind::resume, 0, 1, 3);  // before any new trial
  CHECK(a.running() == 1);
  expect(a.suggest(), suggestion::kind::start, 3, 0, 1);  // a second worker
}

TEST_CASE("a trial whose loss is not finite stops for good and is never the best") {
  asha a = make(1, 9, 3);
  const std::vector<double> floor{0.5, 0.4, 0.3};
  a.suggest();
  REQUIRE(a.report(0, 1, std::numeric_limits<double>::quiet_NaN()).ok());
  CHECK(a.next_action(0) == action::stop);
  for (int t = 1; t < 3; ++t) {
    a.suggest();
    REQUIRE(a.report(t, 1, curve(floor, t, 1)).ok());
  }
  CHECK(a.next_action(2) == action::promote);
  CHECK(a.best_trial() == 2);  // rung 0 so far (trial 2 is still on its way to rung 1); the NaN ranks nowhere
  CHECK(a.report(0, 3, 0.1).code() == errc::invalid_argument);  // not running
  CHECK(std::isinf(a.loss_of(0)));
  // Trial 2 diverges at rung 1: its finite score at rung 0 no longer makes it the best.
  REQUIRE(a.report(2, 3, std::numeric_limits<double>::infinity()).ok());
  CHECK(a.best_trial() == 1);
  CHECK(a.retired(2));
}

TEST_CASE("reports for unknown trials, idle trials or steps outside the rung are refused") {
  asha a = make(1, 9, 2);
  CHECK(a.report(0, 1, 1.0).code() == errc::invalid_argument);  // not started
  a.suggest();
  CHECK(a.report(5, 1, 1.0).code() == errc::invalid_argument);
  CHECK(a.report(-1, 1, 1.0).code() == errc::invalid_argument);
  auto far = a.report(0, 2, 1.0);
  CHECK(far.code() == errc::invalid_argument);
  CHECK(far.err().message.find("outside") != std::string::npos);
  CHECK(a.report(0, 0, 1.0).code() == errc::invalid_argument);
  REQUIRE(a.report(0, 1, 1.0).ok());
  CHECK(a.report(0, 1, 1.0).code() == errc::invalid_argument);  // stopped: a second report
}

TEST_CASE("27 trials on 4 workers find the best of non-crossing curves with under a quarter of the full sweep's steps") {
  std::vector<double> floor;
  for (int t = 0; t < 27; ++t) floor.push_back(std::fmod(t * 0.37, 1.0));  // a permutation-like spread; best: trial 0
  auto run = [&] {
    asha a = make(1, 27, 27);
    auto st = run_workers(a, 4, [&](int t, std::int64_t, std::int64_t to) -> result<double> { return curve(floor, t, to); });
    REQUIRE(st.ok());
    return std::pair{std::move(a), *st};
  };
  auto [a, st] = run();
  CHECK(a.best_trial() == 0);
  CHECK(a.rung_of(0) == 3);
  CHECK(st.steps == a.steps_granted());
  MESSAGE("steps " << st.steps << " of " << 27 * 27 << ", makespan " << st.makespan << ", jobs " << st.jobs);
  CHECK(st.steps * 4 < 27 * 27);
  CHECK(st.steps >= 27 + 9 * 2 + 3 * 6 + 18);  // at least synchronous halving's budget
  auto [b, st2] = run();
  CHECK(st2.steps == st.steps);
  CHECK(st2.makespan == st.makespan);
  CHECK(b.best_trial() == a.best_trial());
}

TEST_CASE("a training error ends the simulated search with that error") {
  asha a = make(1, 9, 3);
  auto st = run_workers(a, 2, [](int t, std::int64_t, std::int64_t) -> result<double> {
    if (t == 1) return make_error(errc::device_failure, "trial 1 broke");
    return 1.0;
  });
  CHECK(st.code() == errc::device_failure);
  CHECK(run_workers(a, 0, {}).code() == errc::invalid_argument);
}

TEST_CASE("a retired trial is never granted steps again, stays retired, and most pruned trials retire before the end") {
  // Random searches: W workers, reports in random order, random (sometimes
  // crossing, sometimes non-finite) losses. After every decision, no trial
  // granted steps may be one retired() said was done with.
  std::mt19937_64 rng(20240611);
  auto uniform = [&] { return double(rng() >> 11) / double(1ull << 53); };
  int retired_before_end = 0, pruned = 0;
  for (int run = 0; run < 200; ++run) {
    const int n = 3 + int(rng() % 30), workers = 1 + int(rng() % 5);
    const std::int64_t r = 1 + std::int64_t(rng() % 3);
    auto made = asha::make({r, r * (3 + std::int64_t(rng() % 25)), 2 + int(rng() % 3), (rng() & 1) != 0}, trials(n));
    REQUIRE(made.ok());
    asha a = std::move(*made);
    std::vector<bool> retired(std::size_t(n), false);
    std::vector<std::int64_t> target(std::size_t(n), 0);
    std::vector<int> running;
    auto check_retired = [&] {
      for (int t = 0; t < n; ++t) {
        INFO("run " << run << " trial " << t);
        if (retired[std::size_t(t)]) CHECK(a.retired(t));  // stays retired
        retired[std::size_t(t)] = a.retired(t);
      }
    };
    auto granted = [&](int t) {
      INFO("run " << run << " trial " << t << " granted after it retired");
      CHECK_FALSE(retired[std::size_t(t)]);
    };
    for (int events = 0; events < 10000; ++events) {
      while (int(running.size()) < workers) {  // free workers ask for work
        const suggestion s = a.suggest();
        if (s.what != suggestion::kind::start && s.what != suggestion::kind::resume) break;
        granted(s.trial);
        target[std::size_t(s.trial)] = s.to_step;
        running.push_back(s.trial);
      }
      if (running.empty()) break;
      const std::size_t pick = std::size_t(rng() % running.size());
      const int t = running[pick];
      running.erase(running.begin() + long(pick));
      const double loss = uniform() < 0.05 ? std::numeric_limits<double>::quiet_NaN() : uniform() + 1.0 / double(target[std::size_t(t)]);
      REQUIRE(a.report(t, target[std::size_t(t)], loss).ok());
      if (a.next_action(t) == action::promote) {
        granted(t);
        target[std::size_t(t)] = a.rungs()[std::size_t(a.rung_of(t)) + 1];
        running.push_back(t);
      } else if (a.next_action(t) == action::stop && std::isfinite(loss)) {
        ++pruned;
      }
      check_retired();
      if (!a.done())
        for (int u = 0; u < n; ++u) retired_before_end += retired[std::size_t(u)] && std::isfinite(a.loss_of(u));
    }
    CHECK(a.done());
    if (auto b = a.best_trial()) CHECK_FALSE(a.retired(*b));
  }
  MESSAGE("pruned (stop decisions) " << pruned << ", retired-before-the-end observations " << retired_before_end);
  CHECK(retired_before_end > 0);
}

TEST_CASE("27 trials at eta 3: once every trial reached the first rung and one reached R, the last 18 of rung 0 are retired") {
  std::vector<double> floor;
  for (int t = 0; t < 27; ++t) floor.push_back(std::fmod(t * 0.37, 1.0));
  asha a = make(1, 27, 27);
  auto st = run_workers(a, 1, [&](int t, std::int64_t, std::int64_t to) -> result<double> { return curve(floor, t, to); });
  REQUIRE(st.ok());
  int retired = 0;
  for (int t = 0; t < 27; ++t) retired += a.retired(t);
  CHECK(retired >= 18);
  CHECK_FALSE(a.retired(*a.best_trial()));
  // Without a trial at R, finish_best may still pick a paused one: none is retired but the failed.
  asha b = make(1, 9, 3);
  b.suggest();
  REQUIRE(b.report(0, 1, 0.5).ok());  // stops? top third of 1 trial: floor(1/3) = 0 promoted
  CHECK(b.next_action(0) == action::stop);
  CHECK_FALSE(b.retired(0));
  b.suggest();
  REQUIRE(b.report(1, 1, std::numeric_limits<double>::quiet_NaN()).ok());
  CHECK(b.retired(1));
}
