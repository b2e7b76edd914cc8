#include "services/scheduler/scheduler_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/scheduler.pb.h"

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

std::uint64_t to_ns(time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}
}  // namespace

handled scheduler_logic::handle(const std::string& type, const std::string& body, const call_context&) {
  if (is<loom::v1::RegisterNodeRequest>(type)) {
    auto req = parse_as<loom::v1::RegisterNodeRequest>(body);
    if (!req) return fail(req.err());
    if (req->node().value().empty()) return fail(errc::invalid_argument, "RegisterNode: node id is empty");
    node n;
    n.id = req->node().value();
    n.service = req->service();
    n.zone = req->zone();
    n.resources = {req->resources().cpu_cores(), req->resources().gpus(), req->resources().memory_bytes(),
                   req->resources().disk_bytes(), req->resources().gpu_model()};
    n.endpoint = req->endpoint();
    n.pid = req->pid();
    n.version = req->version();
    roster_.register_node(std::move(n), now_());
    loom::v1::RegisterNodeReply rep;
    rep.set_roster_version(roster_.version());
    rep.set_heartbeat_interval_ms(static_cast<std::uint32_t>(roster_.interval().count()));
    return reply(rep);
  }
  if (is<loom::v1::NodeHeartbeatRequest>(type)) {
    auto req = parse_as<loom::v1::NodeHeartbeatRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::NodeHeartbeatReply rep;
    rep.set_known(roster_.heartbeat(req->node().value(), now_()));
    return reply(rep);
  }
  if (is<loom::v1::ListNodesRequest>(type)) {
    auto req = parse_as<loom::v1::ListNodesRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::ListNodesReply rep;
    auto now = now_();
    for (const auto& n : roster_.list(req->zone())) {
      auto* o = rep.add_nodes();
      o->mutable_node()->set_value(n.id);
      o->set_service(n.service);
      o->set_zone(n.zone);
      auto* r = o->mutable_resources();
      r->set_cpu_cores(n.resources.cpu_cores);
      r->set_gpus(n.resources.gpus);
      r->set_memory_bytes(n.resources.memory_bytes);
      r->set_disk_bytes(n.resources.disk_bytes);
      r->set_gpu_model(n.resources.gpu_model);
      o->set_endpoint(n.endpoint);
      o->set_pid(n.pid);
      o->set_registered_unix_ns(to_ns(n.registered));
      o->set_last_seen_unix_ns(to_ns(n.last_seen));
      o->set_state(n.draining ? "draining" : to_string(roster_.state(n, now)));
      o->set_version(n.version);
    }
    rep.set_roster_version(roster_.version());
    return reply(rep);
  }
  if (is<loom::v1::DrainNodeRequest>(type)) {
    auto req = parse_as<loom::v1::DrainNodeRequest>(body);
    if (!req) return fail(req.err());
    if (!roster_.drain(req->node().value()))
      return fail(errc::not_found, "no node " + req->node().value() + " in the roster");
    return reply(loom::v1::DrainNodeReply{});
  }
  return unknown_type("scheduler", type);
}

void scheduler_logic::on_tick() { roster_.reap(now_(), std::chrono::minutes(1)); }

}  // namespace loom::scheduler
