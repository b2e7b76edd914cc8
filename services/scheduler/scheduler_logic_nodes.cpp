// The scheduler's node-scoped requests (issue 24 items 1, 2, 7): RegisterNode,
// NodeHeartbeat and PollWork, each checked against the caller's CURVE key
// before anything is read or written (roster_binding.hpp: a service key, a
// trainer key for polls, the node id's bound key, the zone's keys), and
// ListNodes, DrainNode, UndrainNode. Part of scheduler_logic; runs on the
// service actor's thread.
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/store_replies.hpp"

#include "libs/auth/identity.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"
#include "services/scheduler/node_repo.hpp"
#include "services/scheduler/roster_binding.hpp"
#include "services/scheduler/sites/site_registry.hpp"
#include "services/scheduler/wire.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;
}  // namespace

status scheduler_logic::speaks_for(const std::string& id, const std::string& zone, const std::string& service,
                                   const std::string& peer) {
  const node_binding* b = roster_.binding(id);
  if (auto st = may_speak_for(id, b, peer); !st) return st;
  if (auto st = zone_binding(peer, zone); !st) return st;
  if (b && !b->peer.empty()) return ok_status();
  // A node stored before bindings (or listed with none): the first fitting key binds it.
  if (auto st = may_send(node_request::register_node, peer, service); !st) return st;
  node_binding next = b ? *b : node_binding{"", zone, false, now_()};
  next.peer = peer;
  next.bound = now_();
  if (auto st = persist([&](store::transaction& tx) { return save_binding(tx, id, next); }); !st)
    return make_error(errc::unavailable, "state store: " + st.err().message);
  roster_.bind(id, std::move(next));
  return ok_status();
}

handled scheduler_logic::register_node(const loom::v1::RegisterNodeRequest& req, const call_context& ctx) {
  if (req.node().value().empty()) return fail(errc::invalid_argument, "RegisterNode: node id is empty");
  if (auto st = may_send(node_request::register_node, ctx.peer, req.service()); !st) return fail(st.err());
  if (auto st = zone_binding(ctx.peer, req.zone()); !st) return fail(st.err());
  node n = from_wire(req);
  const auto now = now_();
  const node* before = roster_.find(n.id);
  const bool same_process = before && before->pid == n.pid && before->service == n.service;
  auto bound = binding_after_registration(n.id, roster_.binding(n.id), ctx.peer, n.zone, ctx.zone, now);
  if (!bound) return fail(bound.err());
  n.registered = n.last_seen = now;
  n.draining = bound->drained;  // a drain outlives re-registrations (and restarts)
  // Written first, applied second: a failed write leaves the roster as it was.
  auto st = persist([&](store::transaction& tx) -> status {
    if (auto s = save_binding(tx, n.id, *bound); !s) return s;
    return upsert_node(tx, n);
  });
  if (!st) return store_failed(st.err());
  roster_.bind(n.id, *bound);
  const std::string id = n.id;
  roster_.register_node(std::move(n), now);
  // Its own word on the silence before (issue 32): a cut link does not count
  // against the stage it was lost from; a stopped or starved process does.
  if (same_process && req.silent_ms() > 0)
    jobs_.cut_off(id, std::chrono::milliseconds(req.silent_ms()), std::chrono::milliseconds(req.late_ms()), now);
  loom::v1::RegisterNodeReply rep;
  rep.set_roster_version(roster_.version());
  rep.set_heartbeat_interval_ms(static_cast<std::uint32_t>(roster_.interval().count()));
  return reply(rep);
}

// The tick writes the last-seen times it heard. The first sign of life of a
// node after this logic was made (a takeover, a restart) is written at once:
// a leader that lives less than a tick would write none, and under a run of
// failovers a node's stored time would age until a takeover found it dead
// and requeued its running stage.
void scheduler_logic::heard_from(const std::string& id, time_point now) {
  seen_[id] = now;
  if (!heard_.insert(id).second) return;
  if (persist([id, now](store::transaction& tx) { return touch_nodes(tx, {{id, now}}); }))
    seen_.erase(id);  // else the tick retries it
}

handled scheduler_logic::heartbeat(const loom::v1::NodeHeartbeatRequest& req, const call_context& ctx) {
  const std::string& id = req.node().value();
  if (auto st = may_send(node_request::heartbeat, ctx.peer); !st) return fail(st.err());
  if (auto st = may_speak_for(id, roster_.binding(id), ctx.peer); !st) return fail(st.err());
  if (const node* n = roster_.find(id))
    if (auto st = speaks_for(id, n->zone, n->service, ctx.peer); !st) return fail(st.err());
  loom::v1::NodeHeartbeatReply rep;
  auto now = now_();
  rep.set_known(roster_.heartbeat(id, now));
  if (rep.known()) heard_from(id, now);
  if (rep.known()) site_report(req, ctx.peer);
  return reply(rep);
}

handled scheduler_logic::poll_work(const loom::v1::PollWorkRequest& req, const call_context& ctx) {
  if (auto st = may_send(node_request::poll, ctx.peer); !st) return fail(st.err());
  poll_report r = from_wire(req);
  const node* n = roster_.find(r.node);
  if (!n) return fail(errc::not_found, "node " + r.node + " is not registered");
  if (auto st = speaks_for(r.node, n->zone, n->service, ctx.peer); !st) return fail(st.err());
  if (roster_.heartbeat(r.node, now_())) heard_from(r.node, now_());  // a poll is a sign of life too
  const auto p = auth::parse_peer(ctx.peer);
  if (p.kind == auth::peer_kind::site_service) r.caller_site = p.site;
  // A diloco site's uplink, measured by its trainer: kept in that site's link
  // record. Only the site's own key speaks for its zone (speaks_for above),
  // so the site is the node's zone and no other.
  if (sites_ && r.site.up_bytes_per_s > 0 && !r.caller_site.empty())
    if (auto st = sites_->report_bandwidth(n->zone, r.site.up_bytes_per_s); !st)
      std::fprintf(stderr, "loom-scheduler: site %s's bandwidth: %s\n", n->zone.c_str(), st.err().to_string().c_str());
  loom::v1::PollWorkReply rep;
  to_wire(jobs_.poll(r, now_()), &rep);
  return reply(rep);
}

handled scheduler_logic::list_nodes(const loom::v1::ListNodesRequest& req) {
  loom::v1::ListNodesReply rep;
  auto now = now_();
  for (const auto& n : roster_.list(req.zone()))
    to_wire(n, n.draining ? "draining" : to_string(roster_.state(n, now)), rep.add_nodes());
  rep.set_roster_version(roster_.version());
  return reply(rep);
}

handled scheduler_logic::set_drained(const std::string& id, const std::string& reason, bool drained,
                                     const call_context& ctx) {
  const node* n = roster_.find(id);
  const node_binding* b = roster_.binding(id);
  if (!n && !b) return fail(errc::not_found, "no node " + id + " in the roster");
  const std::string zone = n ? n->zone : b->zone;
  if (auto st = may_drain(id, zone, ctx.role, ctx.principal, ctx.peer); !st) return fail(st.err());
  if (auto st = persist([&](store::transaction& tx) { return save_drained(tx, id, drained); }); !st)
    return store_failed(st.err());
  roster_.set_drained(id, drained);
  jobs_.tick(roster_, now_());  // the policy hears of it now: no placement on a drained node after the reply
  auto h = drained ? reply(loom::v1::DrainNodeReply{}) : reply(loom::v1::UndrainNodeReply{});
  h.audit_payload = nlohmann::json{{"node", id}, {"zone", zone}, {"drained", drained}, {"reason", reason}}.dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  return h;
}

}  // namespace loom::scheduler
