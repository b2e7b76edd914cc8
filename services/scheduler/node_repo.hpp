// The roster's rows in the state store (table nodes, schema.cpp): load at
// start, upsert on registration, last-seen flushes, drain, removal. Each call
// runs inside the caller's transaction. Owned by the scheduler actor.
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/roster.hpp"

#include <utility>
#include <vector>

namespace loom::store {
class transaction;
}

namespace loom::scheduler {

result<std::vector<node>> load_nodes(store::transaction& tx);
status upsert_node(store::transaction& tx, const node& n);
status touch_nodes(store::transaction& tx, const std::vector<std::pair<std::string, time_point>>& seen);
status set_draining(store::transaction& tx, const std::string& id);
status delete_node(store::transaction& tx, const std::string& id);

}  // namespace loom::scheduler
