#include "services/scheduler/scheduler_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/scheduler.pb.h"
#include "services/scheduler/node_repo.hpp"

#include <stdexcept>

namespace loom::scheduler {
namespace {
using namespace loom::runtime;

std::uint64_t to_ns(time_point t) {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
}

handled store_failed(const error& e) {
  return fail(e.code == errc::not_found ? e.code : errc::unavailable, "state store: " + e.message);
}
}  // namespace

scheduler_logic::scheduler_logic(store::database* db, clock_fn now) : db_(db), now_(std::move(now)) {
  if (!db_) return;
  auto nodes = db_->with_read_transaction([](store::transaction& tx) { return load_nodes(tx); });
  if (!nodes) throw std::runtime_error("cannot load the roster: " + nodes.err().to_string());
  for (auto& n : *nodes) roster_.restore(std::move(n));
}

status scheduler_logic::persist(const std::function<status(store::transaction&)>& fn) {
  if (!db_) return {};
  return db_->with_transaction([&](store::transaction& tx) { return fn(tx); });
}

handled scheduler_logic::handle(const std::string& type, const std::string& body, const call_context&) {
  if (is<loom::v1::RegisterNodeRequest>(type)) return register_node(body);
  if (is<loom::v1::NodeHeartbeatRequest>(type)) {
    auto req = parse_as<loom::v1::NodeHeartbeatRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::NodeHeartbeatReply rep;
    auto now = now_();
    rep.set_known(roster_.heartbeat(req->node().value(), now));
    if (rep.known()) seen_[req->node().value()] = now;
    return reply(rep);
  }
  if (is<loom::v1::ListNodesRequest>(type)) return list_nodes(body);
  if (is<loom::v1::DrainNodeRequest>(type)) return drain_node(body);
  return unknown_type("scheduler", type);
}

handled scheduler_logic::register_node(const std::string& body) {
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
  n.registered = n.last_seen = now_();
  // Written first, applied second: a failed write leaves the roster as it was.
  if (auto st = persist([&](store::transaction& tx) { return upsert_node(tx, n); }); !st) return store_failed(st.err());
  roster_.register_node(std::move(n), now_());
  loom::v1::RegisterNodeReply rep;
  rep.set_roster_version(roster_.version());
  rep.set_heartbeat_interval_ms(static_cast<std::uint32_t>(roster_.interval().count()));
  return reply(rep);
}

handled scheduler_logic::list_nodes(const std::string& body) {
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

handled scheduler_logic::drain_node(const std::string& body) {
  auto req = parse_as<loom::v1::DrainNodeRequest>(body);
  if (!req) return fail(req.err());
  const auto& id = req->node().value();
  if (!roster_.find(id)) return fail(errc::not_found, "no node " + id + " in the roster");
  if (auto st = persist([&](store::transaction& tx) { return set_draining(tx, id); }); !st) return store_failed(st.err());
  roster_.drain(id);
  return reply(loom::v1::DrainNodeReply{});
}

void scheduler_logic::on_tick() {
  auto gone = roster_.reap(now_(), std::chrono::minutes(1));
  std::vector<std::pair<std::string, time_point>> seen(seen_.begin(), seen_.end());
  if (gone.empty() && seen.empty()) return;
  auto st = persist([&](store::transaction& tx) -> status {
    if (auto s = touch_nodes(tx, seen); !s) return s;
    for (const auto& id : gone)
      if (auto s = delete_node(tx, id); !s) return s;
    return {};
  });
  if (st) seen_.clear();  // else kept and retried next tick
}

}  // namespace loom::scheduler
