// roster_binding: who may speak for a node (ARCHITECTURE.md §8a; docs/security.md,
// "Edge sites"). Pure functions of the caller's CURVE principal
// (call_context::peer), its token and the node's binding (roster.hpp): no
// state, no clock, no store. The scheduler's node handlers call them
// (scheduler_logic_nodes.cpp) before anything is read or written.
//
//   RegisterNode, NodeHeartbeat   a service key: this deployment's ("trainer", "ingest", ...)
//                                 or an enrolled site's ("site:<S>:<service>"); never "client"
//   PollWork                      a trainer key ("trainer", "site:<S>:trainer")
//   node id                       bound to the key and zone of its first registration, for
//                                 good (a node reaped after 60 s of silence keeps it)
//   DrainNode, UndrainNode        an admin, or the node's own site: a token `site:<S>`
//                                 over one of S's keys, for nodes in zone S
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/roster.hpp"

#include <string>

namespace loom::scheduler {

enum class node_request { register_node, heartbeat, poll };

// Whether `peer` may send `what` at all. A registration's `service` (the
// node's) must be the key's own: a trainer key registers trainers, an
// ingest key ingest. permission_denied saying which key may.
status may_send(node_request what, const std::string& peer, const std::string& service = "");

// Whether `peer` may speak for node `id`, bound as `b` (null: never
// registered; a binding without a key, from before v10, binds at its next
// request): permission_denied naming the node, its bound key and the caller's.
status may_speak_for(const std::string& id, const node_binding* b, const std::string& peer);

// The binding node `id` has once `peer` registers it in `zone`: a new one
// for an unbound id, the same for its own key and zone. permission_denied
// when another key holds the id, or when its key would move it to another
// zone — save this deployment's own keys following it into `home_zone` (the
// scheduler's zone: its owner ran `loom up --zone` again).
result<node_binding> binding_after_registration(const std::string& id, const node_binding* b,
                                                const std::string& peer, const std::string& zone,
                                                const std::string& home_zone, time_point now);

// Who may drain or undrain node `id` in zone `zone`: an admin, or the site
// whose zone it is, through its site token over one of its own keys.
status may_drain(const std::string& id, const std::string& zone, const std::string& role,
                 const std::string& token_principal, const std::string& peer);

}  // namespace loom::scheduler
