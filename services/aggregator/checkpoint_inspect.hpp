// checkpoint_inspect: the aggregator's side of InspectCheckpointRequest. On a
// cloud split over hosts the aggregator writes an edge-site stage's final
// model under its own data dir (global_export.hpp) while the scheduler, on
// another host, judges the stage and registers the model: it asks the
// aggregator to inspect the checkpoint where the files are. Only this
// deployment's scheduler may ask, and only about a directory under
// <data>/jobs. Plain functions, called on the service actor (an inspection
// hashes every file: a d12 snapshot takes about a second).
#pragma once

#include "libs/ckpt/inspect.hpp"
#include "libs/status/status.hpp"

#include <string>

namespace loom::aggregator {

// ok when `peer` (call_context::peer, the CURVE principal) is this
// deployment's scheduler key ("scheduler"); otherwise permission_denied
// naming the caller (`principal`, the token's) and its key. Whatever the
// token: a user's, a site's or another service's key never asks.
status scheduler_only(const std::string& peer, const std::string& principal);

// ckpt::inspect_snapshot of `checkpoint` with <data_dir>/keys/checkpoint.key,
// confined first: `checkpoint` must be an absolute path that lies under
// <data_dir>/jobs once every link is resolved (files::confined), else
// permission_denied naming it (whether it exists or not: no existence oracle
// outside jobs/). The directory it resolves to is the one inspected. Then
// not_found when it is not there, corruption naming every problem, as
// inspect_snapshot; the key's error when the key cannot be read.
// manifest_only: ckpt::check_manifest instead (no file hashed); the facts
// then hold the step alone.
result<ckpt::snapshot_facts> inspect_checkpoint(const std::string& data_dir, const std::string& checkpoint,
                                                bool manifest_only = false);

}  // namespace loom::aggregator
