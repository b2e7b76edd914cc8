// The roster's rows in the state store (table nodes, schema.cpp): load at
// start, upsert on registration, last-seen flushes, drain, removal; and each
// node id's binding (table node_bindings, migration v10: its key, zone and
// drain), never removed. Each call runs inside the caller's transaction.
// Owned by the scheduler actor.
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/roster.hpp"

#include <utility>
#include <vector>

namespace loom::store {
class transaction;
struct migration;
}

namespace loom::scheduler {

result<std::vector<node>> load_nodes(store::transaction& tx);
status upsert_node(store::transaction& tx, const node& n);
status touch_nodes(store::transaction& tx, const std::vector<std::pair<std::string, time_point>>& seen);
// Drains or undrains a node id: its binding and, when listed, its roster row.
status save_drained(store::transaction& tx, const std::string& id, bool drained);
status delete_node(store::transaction& tx, const std::string& id);

// v10: node_bindings (node id -> CURVE principal, zone, drained, when bound).
// Rows of nodes stored before it are bound to their zone with no key yet
// (their next request from a fitting key binds it) and keep their drain.
const store::migration& node_bindings_migration();
result<std::vector<std::pair<std::string, node_binding>>> load_bindings(store::transaction& tx);
status save_binding(store::transaction& tx, const std::string& id, const node_binding& b);

}  // namespace loom::scheduler
