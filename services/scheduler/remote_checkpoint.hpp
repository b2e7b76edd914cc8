// remote_checkpoint: where the scheduler judges a stage's final checkpoint.
// On one host the checkpoint is on the scheduler's own disk. On a cloud split
// over hosts (endpoints.json `only`) the aggregator, on the other host, writes
// an edge-site stage's final model under its data dir, so the scheduler asks
// it (InspectCheckpointRequest, checkpoint_inspect.hpp in the aggregator) to
// verify and describe the checkpoint there, with the same code
// (libs/ckpt/inspect.hpp) and the deployment's shared checkpoint key. The
// choice is made per call, on the scheduler actor's thread; a remote call
// holds the actor for at most remote_inspect_timeout.
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/status/status.hpp"
#include "services/scheduler/models/model_registry.hpp"

#include <chrono>
#include <functional>
#include <string>

namespace loom::runtime {
struct service_env;
}

namespace loom::scheduler {

// The aggregator hashes every file of the snapshot before it answers: GPT-2
// 124M (d12, ~0.5 GB) takes about a second; 5 s leaves room for a busy disk
// and stays under the aggregator gateway's 10 s deadline. Not retried: a
// retry would hold the scheduler's actor another 5 s.
inline constexpr std::chrono::milliseconds remote_inspect_timeout{5000};

using manifest_checker = std::function<status(const std::string& dir)>;
using endpoints_source = std::function<layout::endpoints()>;

// Whether checkpoint `dir` is judged on this host: it is a directory here, or
// the aggregator runs here (then a missing one is simply missing).
bool inspect_here(const std::string& dir, const layout::endpoints& eps);

// `local` when inspect_here(dir, eps()), else `remote` (eps() read per call).
checkpoint_inspector choosing_inspector(checkpoint_inspector local, checkpoint_inspector remote, endpoints_source eps);
// The same choice for job_manager's result check: `local` (the cheap
// manifest check) here, else `remote` (split_cloud_check: the aggregator's
// manifest check, as cheap).
manifest_checker choosing_check(manifest_checker local, checkpoint_inspector remote, endpoints_source eps);

// <data>/endpoints.json read now (the aggregator may have restarted on
// another port), else the endpoints the scheduler started with.
endpoints_source current_endpoints(runtime::service_env& env);

// InspectCheckpointRequest to the aggregator endpoints.json names, over CURVE
// with the aggregator's public key (keys/curve/aggregator.pub), the
// scheduler's own key and its service token. Every error names the
// aggregator's endpoint and keeps the aggregator's code (not_found,
// corruption, permission_denied, ...); unavailable when no aggregator is
// listed or it does not answer. A reply whose step is not the one `dir`
// names is corruption. manifest_only: the aggregator checks the manifest
// alone (no file hashed) and the facts hold the step alone: the result check.
checkpoint_inspector aggregator_inspector(runtime::service_env& env, bool manifest_only = false);

// What the scheduler installs: choosing_inspector / choosing_check over the
// local checks with keys/checkpoint.key and aggregator_inspector.
checkpoint_inspector split_cloud_inspector(runtime::service_env& env);
manifest_checker split_cloud_check(runtime::service_env& env);

}  // namespace loom::scheduler
