// diloco_stage: what the trainer service adds to a `diloco` stage's run
// (issue 15). The stage's group is its sites: member r of the group is site
// "site-r" (or diloco.sites[r], an edge site), trains on its own data
// (diloco.datasets[r], or data.* in an order of its own) into its own
// directory, and joins the stage's aggregation at the deployment's (the
// cloud's) aggregator. The aggregation exists only by the grant the
// scheduler put in the assignment (issue 24, libs/diloco/grant): every
// member asks for it with the grant and the spec it builds from its config
// (libs/diloco/grant/stage_spec.hpp, as the scheduler did), which the
// aggregator answers again, so whoever comes first, nothing is started
// twice. Member 0's directory is the stage's: its final snapshot, the
// aggregator's global parameters, is the stage's checkpoint; member 0 then
// ends the aggregation (ExportGlobal: at an edge site, the global model into
// the cloud's stage dir), which refuses unless every site (or
// diloco.min_sites of them) contributed.
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
  std::string site;           // "site-<rank>", or diloco.sites[rank] at an edge site
  std::string aggregation;    // the aggregation's name (diloco::aggregation_name of job and stage)
  std::string grant;          // the assignment's loom.v1.AggregationGrant, serialized
};
// invalid_argument when the assignment carries no grant, or one that names
// another stage or does not place this member's site at its rank.
result<diloco_site> site_of(const assigned_stage& a, const runspec::run_config& cfg);

// The config site `a.rank` runs: out_dir <stage>/site-<r> for r > 0, data
// diloco.datasets[r] when given, train.seed + r (its own order of the data).
void localize(runspec::run_config& cfg, const assigned_stage& a);

// The site's CURVE identity: <data>/trainer/sites/<site>.key, made once; its
// public key is published as <data>/keys/diloco/<site>.pub, which the
// aggregator's delta server admits as site <site> (within a second).
result<wire::curve_keypair> site_identity(const layout::paths& paths, const std::string& site);

// StartAggregationRequest at the deployment's aggregator (endpoints.json,
// keys/curve/aggregator.pub) as this trainer (its operator service token); at
// an edge site the cloud's (keys/cloud/aggregator.pub, the site's token),
// with the grant and the spec built from `cfg` (localized: its seed less the
// rank) and the grant's start (the job's previous stage, or the seed).
// unavailable while the aggregation is being made (site_sync asks again).
result<aggregator_address> start_aggregation(runtime::service_env& env, const runspec::run_config& cfg,
                                             const diloco_site& where, std::uint32_t rank);

// The site's sync for the run of `a` (site_of, site_identity, start_aggregation
// as its locate). `cfg` (localized) and `env` must outlive it.
result<std::unique_ptr<site_sync>> make_site_sync(runtime::service_env& env, const runspec::run_config& cfg,
                                                  const assigned_stage& a, const std::atomic<bool>* stop);

// Member 0, its stage done, ends the aggregation (ExportGlobal with the
// grant). At an edge site (end_only false) the cloud's aggregator writes the
// job's global θ (what `snapshot`, its own final snapshot, holds) as the
// cloud's checkpoint in the granted stage dir; `snapshot` is then that
// path, which the stage reports. A stage of this deployment's trainers
// (end_only) wrote its checkpoint itself. Either way the aggregation is
// retired, and the sites that contributed come back; conflict, naming the
// sites that never did, when fewer than diloco.min_sites (default: all) did.
struct stage_end {
  std::string snapshot;
  std::vector<std::string> contributed, missing;
};
result<stage_end> end_aggregation(runtime::service_env& env, const assigned_stage& a, const std::string& snapshot,
                                  bool end_only);

// loom_trainer_diloco_*{job, site} (services/trainer/README.md): payload
// bytes each way, deltas sent, late, deferred and dropped, rounds joined,
// the aggregator unreachable, stall seconds, the uplink codec's relative
// error on the last delta, fragment 0's merged version (the outer round).
void publish(metrics::service_metrics* m, const site_sync& s);
// One line for the log: syncs, bytes, sync latency p50/p99, stalls.
std::string describe(const site_sync_stats& s);

}  // namespace loom::trainer
