// Weak links between sites and the aggregator (issue 15 §5 and the outage
// test), at the level of the trainer's sync policy over real sockets: an
// aggregator in this process (engine + delta server on a CURVE socket) and
// four synthetic sites, each a thread running services/trainer/diloco/
// site_sync through libs/diloco/client on loopback, one site's link shaped by
// libs/wire's link shaper (what LOOM_LINK_SHAPE[_<SITE>] gives a trainer).
// Not a whole `loom up` job: synthetic 20 ms inner steps make the figures
// (continuity, catch-up) about the sync, and the test take seconds.
#include "libs/wire/link_outages.hpp"
#include "libs/wire/link_spec.hpp"
#include "loom/v1/aggregator.pb.h"
#include "tests/diloco_links/harness.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>

#include <array>
#include <cstdlib>
#include <thread>

using namespace loom;
using namespace loom::test::links;
using namespace std::chrono_literals;

namespace {

constexpr int sites = 4;
constexpr int cut_site = 2;
// The target: continuity >= 0.95. The sync runs on a thread of its own
// (site_sync), so a cut site trains on through the cut: 0.997-0.998 measured
// here on a quiet box (0.86-0.92 while the sync still ran on the training
// thread, under load 6-11).
constexpr double continuity_floor = 0.95;

// The frames the aggregator received are deltas and control messages only.
void check_frames(const v1::AggregatorStatusReply& st) {
  std::uint64_t total = 0;
  for (const auto& [type, n] : st.frames_received()) {
    CHECK_MESSAGE((type == "DeltaHeader" || type == "DeltaJoin" || type == "GlobalPull" || type == "RoundStatusQuery"),
                  type << ": " << n);
    total += n;
  }
  CHECK(st.frames_received().at("DeltaHeader") > 0);
  CHECK(total > 0);
}

// The version (min over fragments) a site held at `t` (seconds since origin).
std::uint64_t version_at(const site_result& r, double t) {
  std::uint64_t v = 0;
  for (const auto& [when, version] : r.versions)
    if (when <= t) v = version;
  return v;
}

}  // namespace

TEST_CASE("one site offline 20% of the time in bursts: the job completes, the others' rounds go on, continuity is measured and the site catches up from the global parameters within 30 s") {
  auto agg = local_aggregator::start({}).value();
  // Site 2's link: down a fifth of the time in bursts of 1-2 s, seeded (the
  // same windows every run); the others' links are perfect. Seed 1's first
  // two windows, [3.27, 4.46) and [8.31, 10.09) s, both start within the
  // 10 s of steps however fast the run; seed 11's second started at 11.22 s,
  // inside a slow run only (a fast CI run saw one window and failed).
  auto cut = wire::parse_link_spec("outage=20%/1-2s,seed=1").value();
  const auto origin = clock::now();
  std::vector<site_result> results(sites);
  std::vector<std::thread> pool;
  for (int s = 0; s < sites; ++s)
    pool.emplace_back([&, s] {
      site_options o;
      o.where = agg->address();
      o.keys = agg->site_keys(s);
      o.job = agg->job();
      o.site = site_name(s);
      o.index = s;
      o.steps = 500;  // 10 s of 20 ms steps
      if (s == cut_site) o.link = cut;
      results[s] = run_site(o, origin);
    });
  for (auto& t : pool) t.join();

  for (int s = 0; s < sites; ++s) REQUIRE_MESSAGE(results[s].outcome.ok(), site_name(s) << ": " << results[s].outcome.err().message);
  const auto& r2 = results[cut_site];
  // The windows the link went through (the link starts with the site's join, ~ at origin).
  const auto windows = wire::generate_outages(*cut.outage_gen, cut.seed, std::chrono::duration_cast<wire::link_time>(
                                                                              std::chrono::duration<double>(r2.wall_s)));
  double down = 0;
  for (const auto& w : windows)
    down += std::min(std::chrono::duration<double>(w.end).count(), r2.wall_s) - std::chrono::duration<double>(w.start).count();
  const double c = continuity(results);
  for (int s = 0; s < sites; ++s)
    MESSAGE(site_name(s) << ": productive " << results[s].productive_s << " s, stalled " << results[s].stall_s
                         << " s, last step at " << results[s].train_end_s << " s, finish " << results[s].finish_s
                         << " s, unreachable " << results[s].stats.unreachable << ", deferred " << results[s].stats.deferred
                         << ", late merges " << results[s].stats.late_merges);
  MESSAGE("site 2 offline " << 100 * down / r2.wall_s << "% of " << r2.wall_s << " s in " << windows.size()
                            << " bursts; unreachable " << r2.stats.unreachable << " times, stalled " << r2.stall_s
                            << " s; continuity " << c);
  REQUIRE(windows.size() >= 2);
  CHECK(down / r2.wall_s > 0.12);     // the seed gives a run that is really cut about a fifth of the time
  CHECK(r2.stats.unreachable >= windows.size());  // and the site felt every cut
  CHECK(c >= continuity_floor);

  // During every cut the other sites' rounds went on; after it, site 2 holds
  // the global version of the moment it came back within 30 s.
  double worst = 0;
  for (const auto& w : windows) {
    const double from = std::chrono::duration<double>(w.start).count(), to = std::chrono::duration<double>(w.end).count();
    if (to + 1.0 > r2.versions.back().first) continue;  // ended with the run: nothing to catch up in it
    CHECK_MESSAGE(version_at(results[0], to) >= version_at(results[0], from) + 2, "window " << from << "-" << to << " s");
    const std::uint64_t want = version_at(results[0], to);
    double caught = -1;
    for (const auto& [when, version] : r2.versions)
      if (when >= to && version >= want) {
        caught = when - to;
        break;
      }
    CHECK_MESSAGE(caught >= 0, "site 2 never reached version " << want << " after the cut ending at " << to << " s");
    worst = std::max(worst, caught);
  }
  MESSAGE("site 2 caught up with the global version within " << worst << " s of each return");
  CHECK(worst <= 30.0);
  CHECK(r2.stats.wire.params_applied > 2);  // it caught up with parameters, not only updates

  // The rounds closed without it, and it was counted back in: its last deltas are held.
  const auto st = agg->status();
  REQUIRE(st.jobs_size() == 1);
  for (int p = 0; p < 2; ++p) CHECK(agg->last_round(site_name(cut_site), p) + 3 >= static_cast<std::int64_t>(agg->version(p)));
  check_frames(st);
}

TEST_CASE("a site's shaped link delays both directions: every request of a join takes at least twice the latency") {
  auto agg = local_aggregator::start({}).value();
  for (const auto lat : {0ms, 40ms}) {
    site_options o;
    o.where = agg->address();
    o.keys = agg->site_keys(1);
    o.job = agg->job();
    o.site = site_name(1);
    o.steps = 0;
    o.timeout = 2000ms;
    o.link = wire::parse_link_spec("lat=" + std::to_string(lat.count()) + "ms").value();
    const auto t0 = clock::now();
    auto r = run_site(o, t0);
    const auto took = clock::now() - t0;
    REQUIRE_MESSAGE(r.outcome.ok(), r.outcome.err().message);
    // A join is 1 + fragments requests; finish() adds a round trip per fragment (a poll).
    MESSAGE("lat " << lat.count() << " ms: join and finish in " << std::chrono::duration<double, std::milli>(took).count() << " ms");
    if (lat > 0ms) CHECK(took >= 3 * 2 * lat);
    else CHECK(took < 500ms);
  }
}

TEST_CASE("loom-trainer serve refuses to start with a bad LOOM_LINK_SHAPE variable and names it and the field") {
  for (const auto& [name, spec, field] : std::vector<std::array<std::string, 3>>{
           {"LOOM_LINK_SHAPE", "bw=10mbps", "bw: unknown unit"}, {"LOOM_LINK_SHAPE_SITE_3", "lat=5ms,loss=2", "loss"}}) {
    CAPTURE(name);
    ::setenv(name.c_str(), spec.c_str(), 1);
    auto r = test::run({test::bin("loom-trainer"), "serve", "--data-dir", "/nonexistent"}, std::chrono::seconds(20));
    ::unsetenv(name.c_str());
    CHECK(r.code == 2);
    CHECK(r.err.find("loom-trainer: " + name + ": link spec \"" + spec + "\": " + field) != std::string::npos);
  }
}

TEST_CASE("loom-trainer serve refuses LOOM_LINK_SHAPE_ with no site after it, naming the variable") {
  ::setenv("LOOM_LINK_SHAPE_", "lat=1h", 1);
  auto r = test::run({test::bin("loom-trainer"), "serve", "--data-dir", "/nonexistent"}, std::chrono::seconds(20));
  ::unsetenv("LOOM_LINK_SHAPE_");
  CHECK(r.code == 2);
  CHECK_MESSAGE(r.err.find("loom-trainer: LOOM_LINK_SHAPE_ names no site") != std::string::npos, r.err);
}
