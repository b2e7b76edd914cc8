// Which nodes an import may place shards on (`loom data import --nodes`):
// the trainer nodes in the scheduler's roster, asked over the service's own
// CURVE client with its service token. The actor asks once per import that
// names nodes (a ListNodes round trip on loopback: milliseconds; 1 s at most
// when the scheduler is down, and then the import is refused, not guessed).
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::runtime {
struct service_env;
}

namespace loom::ingest {

// ok when every node of `asked` is in `known`; else invalid_argument naming
// the first unknown one and the known ones ("(none registered)" when empty).
status check_nodes(const std::vector<std::string>& asked, const std::vector<std::string>& known);

// The ids of the trainer nodes in the scheduler's roster (any state: a node
// restarting is still this deployment's). unavailable naming the scheduler
// when it cannot be asked. Any thread; REQUIRES: env outlives the call.
// With `zone`: only those of that zone (an edge site's own trainers, not the
// cloud's or another site's).
result<std::vector<std::string>> trainer_nodes(runtime::service_env& env, const std::string& zone = "");

}  // namespace loom::ingest
