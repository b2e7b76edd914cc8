// The weak-network tests' harness (issue 15 §5, tests/diloco_links.test.cpp,
// tests/diloco_netns.test.cpp, bench/diloco_link_bench.cpp): an aggregator in
// this process (services/aggregator's engine and delta server, on a real
// CURVE socket, in a temp data dir) and synthetic sites that train through
// the trainer's own sync policy (services/trainer/diloco/site_sync) over a
// real socket, optionally through an emulated link.
//
// A synthetic site's inner step moves x toward the site's own target
// (x += α(t_s − x)) and then sleeps out `step_time`: the step's "productive
// time". Everything else a site spends (site_sync's after_step: sends, waits,
// timeouts on a cut link) is stall. Continuity = Σ productive / (sites × wall).
//
// local_aggregator: made and destroyed by the test's thread; status() from any
// thread (the engine locks). run_site: one call per site thread.
#pragma once

#include "libs/files/temp_dir.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"
#include "libs/wire/link_shaper.hpp"
#include "services/aggregator/aggregation.hpp"
#include "services/trainer/diloco/site_sync.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom::aggregator {
class engine;
class delta_server;
}  // namespace loom::aggregator
namespace loom::v1 {
class AggregatorStatusReply;
}

namespace loom::test::links {

using clock = std::chrono::steady_clock;

struct aggregator_options {
  std::string bind = "tcp://127.0.0.1:*";
  int sites = 4;                 // keys for site-0 .. site-<n-1> in keys/peers
  std::size_t values = 2000;     // the flat model's size
  int fragments = 2;
  // H: a fragment syncs every H steps; with P = 2 a site sends a delta every
  // H/2 steps (250 ms of 20 ms steps), the cadence of a real site's rounds
  // relative to its steps, shortened.
  std::uint64_t sync_every = 25;
  // Rounds close by quorum (every active site) or by a deadline derived from
  // the arrival times, at least this: a cut site must not hold the others
  // (the product's default is 1 s, for real models' seconds-long rounds).
  std::chrono::milliseconds deadline_min{150};
  std::uint64_t staleness_bound = 1;
};

class local_aggregator {
 public:
  static result<std::unique_ptr<local_aggregator>> start(const aggregator_options& o);
  ~local_aggregator();

  const std::string& job() const { return job_; }
  const std::string& data_dir() const { return dir_.path(); }
  trainer::aggregator_address address() const;
  const wire::curve_keypair& site_keys(int s) const { return keys_[s]; }
  loom::v1::AggregatorStatusReply status() const;
  // The last round of `site` the job holds for fragment p (-1: none), and the fragment's version.
  std::int64_t last_round(const std::string& site, int p) const;
  std::uint64_t version(int p) const;

 private:
  local_aggregator() = default;
  files::temp_dir dir_{"loom-links"};
  std::string job_ = "links";
  std::shared_ptr<aggregator::engine> engine_;
  std::unique_ptr<aggregator::delta_server> server_;
  std::vector<wire::curve_keypair> keys_;
};

std::string site_name(int s);

struct site_options {
  trainer::aggregator_address where;
  wire::curve_keypair keys;
  std::string job, site;
  int index = 0;                          // picks the site's target
  std::size_t values = 2000;              // as the aggregator's (aggregator_options)
  int fragments = 2;
  std::uint64_t sync_every = 25;
  std::optional<wire::link_config> link;  // the site's emulated link (none: the real socket only)
  int steps = 400;
  std::chrono::milliseconds step_time{20};
  // Per request: loopback answers in < 1 ms, 20 ms when the box is loaded;
  // the time a cut site loses per try (site_sync's backoff spaces the tries).
  std::chrono::milliseconds timeout{100};
  // 0: never wait for a round's version at a sync; it is merged after a later
  // step (keep_progress): Streaming DiLoCo's overlap of communication with
  // the next inner steps (τ ≥ 1), so a sync costs a site its requests only.
  double sync_wait_s = 0;
  const std::atomic<bool>* stop = nullptr;
  // Called after every step (site thread): step, seconds since `origin`, the site's versions.
  std::function<void(int, double, const std::vector<std::uint64_t>&)> on_step;
};

struct site_result {
  status outcome = ok_status();  // start / after_step / finish
  double productive_s = 0, wall_s = 0, stall_s = 0;
  double train_end_s = 0;  // since origin: the end of the last inner step (then finish())
  double finish_s = 0;     // finish(): the last deltas and versions
  // (seconds since origin, min over fragments of the site's version) after every step.
  std::vector<std::pair<double, std::uint64_t>> versions;
  // Seconds from a delta of fragment p sent (the step it was due) to the
  // step after which its round's version was merged.
  std::vector<double> sync_ms;
  trainer::site_sync_stats stats;
};

// Joins, runs `steps` synthetic inner steps with site_sync::after_step after
// each, then finish(take_global = false). Never throws.
site_result run_site(const site_options& o, clock::time_point origin);

// Continuity of a run: Σ productive / (sites × wall), wall = from origin (all
// sites start together) to the last site's last inner step. The final sync
// (finish) is left out: a fixed cost of a job's end, not of its links.
double continuity(const std::vector<site_result>& r);
// The p-th quantile (0..1) of `v` (nearest rank); 0 for none.
double quantile(std::vector<double> v, double q);

}  // namespace loom::test::links
