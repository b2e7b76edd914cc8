#include "services/scheduler/roster_binding.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"

namespace loom::scheduler {
namespace {

const char* name_of(node_request r) {
  switch (r) {
    case node_request::register_node: return "RegisterNode";
    case node_request::heartbeat: return "NodeHeartbeat";
    case node_request::poll: return "PollWork";
  }
  return "?";
}

std::string key_name(const std::string& peer) { return peer.empty() ? "(none)" : auth::printable(peer); }

}  // namespace

status may_send(node_request what, const std::string& peer, const std::string& service) {
  const auto p = auth::parse_peer(peer);
  const std::string req = name_of(what);
  switch (p.kind) {
    case auth::peer_kind::client:
      return make_error(errc::permission_denied,
                        req + " from the client key: a node speaks only with its own service key, never the "
                              "client's, whatever the token's role");
    case auth::peer_kind::unenrolled:
    case auth::peer_kind::none:
      return make_error(errc::permission_denied, req + " needs a node's own CURVE key; this connection has " +
                                                     (p.kind == auth::peer_kind::none ? "none" : "an unenrolled one"));
    case auth::peer_kind::own_service:
    case auth::peer_kind::site_service:
      break;
  }
  if (what == node_request::poll && !auth::is_trainer_key(p))
    return make_error(errc::permission_denied,
                      "PollWork comes only from a trainer's key, not " + key_name(peer) + "'s");
  if (what == node_request::register_node && service != p.service)
    return make_error(errc::permission_denied, "CURVE key " + key_name(peer) + " registers only " + p.service +
                                                   " nodes, not a " + auth::printable(service) + " node");
  return ok_status();
}

status may_speak_for(const std::string& id, const node_binding* b, const std::string& peer) {
  if (!b || b->peer.empty() || b->peer == peer) return ok_status();
  return make_error(errc::permission_denied, "node " + auth::printable(id) + " is bound to CURVE key " +
                                                 key_name(b->peer) + " (zone " + auth::printable(b->zone) +
                                                 "); this request came with key " + key_name(peer));
}

result<node_binding> binding_after_registration(const std::string& id, const node_binding* b,
                                                const std::string& peer, const std::string& zone,
                                                const std::string& home_zone, time_point now) {
  if (!b) return node_binding{peer, zone, false, now};
  if (auto st = may_speak_for(id, b, peer); !st) return st.err();
  node_binding next = *b;
  if (next.peer.empty()) next.bound = now;  // a node stored before bindings: its key is bound now
  next.peer = peer;
  if (b->zone == zone) return next;
  const bool own = auth::parse_peer(peer).kind == auth::peer_kind::own_service;
  if (!own || zone != home_zone)
    return make_error(errc::permission_denied, "node " + auth::printable(id) + " is bound to zone " +
                                                   auth::printable(b->zone) + " (CURVE key " + key_name(next.peer) +
                                                   "); key " + key_name(peer) + " cannot move it to zone " +
                                                   auth::printable(zone));
  next.zone = zone;  // this deployment's own node follows the deployment's zone
  return next;
}

status may_drain(const std::string& id, const std::string& zone, const std::string& role,
                 const std::string& token_principal, const std::string& peer) {
  if (role == "admin") return ok_status();
  const auto site = auth::site_of_token(token_principal);
  const auto p = auth::parse_peer(peer);
  if (site && p.kind == auth::peer_kind::site_service && p.site == *site && zone == *site) return ok_status();
  if (site && (p.kind != auth::peer_kind::site_service || p.site != *site))
    return make_error(errc::permission_denied, "site " + auth::printable(*site) +
                                                   "'s token counts only over its own CURVE keys, not " +
                                                   key_name(peer));
  if (site)
    return make_error(errc::permission_denied, "site " + auth::printable(*site) + " drains only its own nodes; " +
                                                   auth::printable(id) + " is in zone " + auth::printable(zone));
  return make_error(errc::permission_denied, "draining node " + auth::printable(id) +
                                                 " is the admin's, or its own site's (zone " + auth::printable(zone) +
                                                 "); a " + auth::printable(role) + " token may not");
}

}  // namespace loom::scheduler
