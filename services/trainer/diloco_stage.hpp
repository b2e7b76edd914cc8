// diloco_stage: what the trainer service adds to a `diloco` stage's run
// (issue 15). The stage's group is its sites: member r of the group is site
// "site-r", trains on its own data (diloco.datasets[r], or data.* in an order
// of its own) into its own directory, and joins the stage's aggregation at
// the deployment's aggregator. Member 0 writes the initial parameters and
// starts the aggregation; every member asks for it with the same spec (which
// the aggregator answers again), so whoever comes first, nothing is started
// twice. Member 0's directory is the stage's: its final snapshot, the
// aggregator's global parameters, is the stage's checkpoint.
//
// Called from the worker's training thread; plain functions.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"
#include "services/trainer/diloco/site_sync.hpp"
#include "services/trainer/wire.hpp"
#include "services/trainer/work_state.hpp"

#include <atomic>
#include <memory>
#include <string>

namespace loom::runtime {
struct service_env;
}
namespace loom::metrics {
class service_metrics;
}

namespace loom::trainer {

struct diloco_site {
  std::string site;           // "site-<rank>"
  std::string aggregation;    // the aggregation's name: "<job>.<stage>", [A-Za-z0-9._-]{1,64}
  std::string init_snapshot;  // <stage dir>/checkpoints/step-000000 (member 0's)
  std::uint64_t init_seed = 0;  // edge sites: the aggregator's init from train.seed instead of a snapshot
};
diloco_site site_of(const assigned_stage& a);

// The config site `a.rank` runs: out_dir <stage>/site-<r> for r > 0, data
// diloco.datasets[r] when given, train.seed + r (its own order of the data).
void localize(runspec::run_config& cfg, const assigned_stage& a);

// The site's CURVE identity: <data>/trainer/sites/<site>.key, made once; its
// public key is published as <data>/keys/diloco/<site>.pub, which the
// aggregator's delta server admits as site <site> (within a second).
result<wire::curve_keypair> site_identity(const layout::paths& paths, const std::string& site);

// StartAggregationRequest at the deployment's aggregator (endpoints.json,
// keys/curve/aggregator.pub) as this trainer (its operator service token); at
// an edge site the cloud's (keys/cloud/aggregator.pub, the site's token).
// Edge sites (diloco.sites names them): member r is site sites[r], its key is
// the trainer's own (enrolled), and the aggregation starts from init_seed.
result<aggregator_address> start_aggregation(runtime::service_env& env, const runspec::run_config& cfg,
                                             const diloco_site& where);

// The site's sync for the run of `a` (site_of, site_identity, start_aggregation
// as its locate). `cfg` (localized) and `env` must outlive it.
result<std::unique_ptr<site_sync>> make_site_sync(runtime::service_env& env, const runspec::run_config& cfg,
                                                  const assigned_stage& a, const std::atomic<bool>* stop);

// An edge site's member 0, its stage done: asks the cloud's aggregator to
// write the job's global θ (what `snapshot`, its own final snapshot, holds)
// as the cloud's checkpoint under `cloud_stage_dir` (the stage directory the
// scheduler named); returns that snapshot's path, which the stage reports.
result<std::string> export_global(runtime::service_env& env, const assigned_stage& a,
                                  const std::string& cloud_stage_dir, const std::string& snapshot);

// loom_trainer_diloco_*{job, site} (services/trainer/README.md): payload
// bytes each way, deltas sent, late, deferred and dropped, rounds joined,
// the aggregator unreachable, stall seconds, the uplink codec's relative
// error on the last delta, fragment 0's merged version (the outer round).
void publish(metrics::service_metrics* m, const site_sync& s);
// What the site's trainer reports with each poll (`loom job watch`).
site_report report_of(const site_sync& s);
// One line for the log: syncs, bytes, sync latency p50/p99, stalls.
std::string describe(const site_sync_stats& s);

}  // namespace loom::trainer
