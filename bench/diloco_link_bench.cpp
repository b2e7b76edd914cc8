// diloco_link_bench: 4 sites on loopback through the real sync path (the
// trainer's site_sync, libs/diloco/client, the aggregator's CURVE delta
// socket and engine in this process; tests/diloco_links/harness), synthetic
// inner steps of `--step-ms`. Two cases: every link perfect, and site 2's
// link cut 20% of the time in bursts of 1-2 s (libs/wire link shaper, seeded).
//
//   diloco_link_bench [--steps N] [--step-ms MS] [--h H] [--values N] [--seed S] [--timeout-ms MS]
//   (defaults 1500 steps of 20 ms, H = 25, 2000 values, seed 11, 100 ms)
// Last lines, one per case:
//   case=<name> sites=4 continuity=… sync_p50_ms=… sync_p99_ms=… catch_up_max_s=… offline=… seconds=…
// continuity = Σ productive inner-step time / (sites × wall); sync = a
// fragment's delta sent (the step it was due) -> its round's version merged,
// over the sites with a perfect link; catch-up = from the end of a cut to the
// cut site holding the global version of that moment.
#include "bench/bench_util.hpp"
#include "libs/wire/link_outages.hpp"
#include "libs/wire/link_spec.hpp"
#include "tests/diloco_links/harness.hpp"

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

using namespace loom;
using namespace loom::test::links;

namespace {

int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::stoi(argv[i + 1]);
  return fallback;
}

std::uint64_t version_at(const site_result& r, double t) {
  std::uint64_t v = 0;
  for (const auto& [when, version] : r.versions)
    if (when <= t) v = version;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  const int steps = arg_int(argc, argv, "--steps", 1500);
  const int step_ms = arg_int(argc, argv, "--step-ms", 20);
  const int values = arg_int(argc, argv, "--values", 2000);
  const int seed = arg_int(argc, argv, "--seed", 11);
  const int h = arg_int(argc, argv, "--h", 25);
  const int timeout_ms = arg_int(argc, argv, "--timeout-ms", 100);
  constexpr int sites = 4, cut_site = 2;
  std::vector<std::string> lines;
  for (const bool cut : {false, true}) {
    aggregator_options ao;
    ao.values = static_cast<std::size_t>(values);
    ao.sync_every = static_cast<std::uint64_t>(h);
    auto agg = local_aggregator::start(ao);
    if (!agg) {
      std::fprintf(stderr, "diloco_link_bench: %s\n", agg.err().to_string().c_str());
      return 1;
    }
    const auto link = wire::parse_link_spec("outage=20%/1-2s,seed=" + std::to_string(seed)).value();
    const auto origin = clock::now();
    std::vector<site_result> r(sites);
    std::vector<std::thread> pool;
    for (int s = 0; s < sites; ++s)
      pool.emplace_back([&, s] {
        site_options o;
        o.where = (*agg)->address();
        o.keys = (*agg)->site_keys(s);
        o.job = (*agg)->job();
        o.site = site_name(s);
        o.index = s;
        o.values = ao.values;
        o.sync_every = ao.sync_every;
        o.timeout = std::chrono::milliseconds(timeout_ms);
        o.steps = steps;
        o.step_time = std::chrono::milliseconds(step_ms);
        if (cut && s == cut_site) o.link = link;
        r[s] = run_site(o, origin);
      });
    for (auto& t : pool) t.join();
    for (int s = 0; s < sites; ++s)
      if (!r[s].outcome) {
        std::fprintf(stderr, "diloco_link_bench: %s: %s\n", site_name(s).c_str(), r[s].outcome.err().to_string().c_str());
        return 1;
      }
    for (int s = 0; s < sites; ++s)
      std::printf("  %s %s: productive %.2f s, stall %.2f s, training %.2f s, finish %.2f s, unreachable %llu, deferred %llu, params %llu\n",
                  cut ? "outage" : "loopback", site_name(s).c_str(), r[s].productive_s, r[s].stall_s, r[s].train_end_s, r[s].finish_s,
                  static_cast<unsigned long long>(r[s].stats.unreachable),
                  static_cast<unsigned long long>(r[s].stats.deferred),
                  static_cast<unsigned long long>(r[s].stats.wire.params_applied));
    std::vector<double> sync;
    for (int s = 0; s < sites; ++s)
      if (!cut || s != cut_site) sync.insert(sync.end(), r[s].sync_ms.begin(), r[s].sync_ms.end());
    double offline = 0, catch_up = 0;
    if (cut) {
      const auto& c = r[cut_site];
      for (const auto& w : wire::generate_outages(*link.outage_gen, link.seed,
                                                  std::chrono::duration_cast<wire::link_time>(std::chrono::duration<double>(c.wall_s)))) {
        const double from = std::chrono::duration<double>(w.start).count(), to = std::chrono::duration<double>(w.end).count();
        offline += std::min(to, c.wall_s) - from;
        if (to + 1.0 > c.versions.back().first) continue;
        const auto want = version_at(r[0], to);
        for (const auto& [when, version] : c.versions)
          if (when >= to && version >= want) {
            catch_up = std::max(catch_up, when - to);
            break;
          }
      }
      offline /= c.wall_s;
    }
    double wall = 0;
    for (const auto& s : r) wall = std::max(wall, s.wall_s);
    char line[512];
    std::snprintf(line, sizeof line,
                  "case=%s sites=%d continuity=%.4f sync_p50_ms=%.1f sync_p99_ms=%.1f catch_up_max_s=%.2f offline=%.3f "
                  "syncs=%zu seconds=%.1f",
                  cut ? "outage_site2_20pct" : "loopback", sites, continuity(r), quantile(sync, 0.5),
                  quantile(sync, 0.99), catch_up, offline, sync.size(), wall);
    lines.push_back(line);
  }
  std::printf("diloco_link_bench: %d sites, %d steps of %d ms, H=%d, 2 fragments, %d values int8, load %s\n", sites,
              steps, step_ms, h, values, bench::loadavg().c_str());
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  return 0;
}
