// scheduler_targets: the scheduler replicas a service's long-lived client
// calls (issue 30), followed as the operator adds hosts. A replica in another
// zone is known through peers.json (`loom up --peer-endpoints FILE`, given to
// a running deployment too); endpoints.json and peers.json are read again
// whenever either file's modification time changes, so the trainers, the
// registrar and the key follower of a host started before its peers take a
// new standby into their replica set without a restart.
// One thread owns an instance (the loop whose client it feeds).
#pragma once

#include "libs/layout/layout.hpp"

#include <ctime>
#include <string>
#include <vector>

namespace loom::runtime {

class scheduler_targets {
 public:
  // `initial`: the targets the process started with (its endpoints as read at start).
  scheduler_targets(layout::paths paths, std::vector<std::string> initial);

  const std::vector<std::string>& list() const { return targets_; }
  // Reads the files again when one changed since the last call; true when the
  // targets differ now (rebuild the client on list()). A file that cannot be
  // read or names no scheduler leaves the targets as they were.
  bool refresh();

 private:
  layout::paths paths_;
  std::vector<std::string> targets_;
  std::timespec seen_eps_{}, seen_peers_{};
};

// "a, b, c": targets for a log line.
std::string describe_targets(const std::vector<std::string>& targets);

}  // namespace loom::runtime
