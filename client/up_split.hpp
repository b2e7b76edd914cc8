// `loom up --only LIST --peer-endpoints FILE` (issue 26 item 2): a cloud
// split over hosts. Each host runs the services its --only names (kept in
// endpoints.json like --trainers) and learns the other hosts' from copies
// of their endpoints.json (--peer-endpoints, repeatable), merged by process
// name into <data>/peers.json, which layout::read_endpoints merges in.
// Scheduler replicas in other zones (issue 30): `--only scheduler
// --scheduler-replicas N --scheduler-replica K` runs replica K here; two
// hosts may both run the scheduler, never the same replica. Both hosts hold the same keys (a copy
// of the first host's keys/) and, for the scheduler's and ingest's tables,
// one PostgreSQL ($LOOM_DATABASE_URL). The services away from the scheduler
// learn the sites' keys from it (libs/runtime/key_follower.hpp).
// Called from `loom up`'s main thread, before anything is started.
#pragma once

#include "client/cli.hpp"
#include "libs/layout/layout.hpp"

#include <optional>
#include <string>
#include <vector>

namespace loom::cli {

struct split_plan {
  std::vector<std::string> only;          // this host's services; empty = every one (no split)
  int replica = 0;                        // --scheduler-replica K (kept); 0: every replica here
  std::optional<layout::endpoints> peers;  // --peer-endpoints: the other hosts' processes, to merge into peers.json
};

// --only and --peer-endpoints judged against `previous` (endpoints.json's):
// invalid_argument naming the option and value for an unknown or repeated
// service, --only at an edge site, --peer-endpoints without a split, a file
// that is not a split cloud's endpoints.json, a process both hosts run, a
// --scheduler-replica without --only naming the scheduler or beyond
// --scheduler-replicas, or a scheduler or audit that neither this host nor a
// peer runs.
result<split_plan> split_option(const context& c, const layout::endpoints& previous);

bool only_given(const context& c);

// Merges plan.peers (when set) into <data>/peers.json: a process named
// again takes its new endpoints, the others stay.
status keep_peers(const layout::paths& p, const split_plan& plan);

}  // namespace loom::cli
