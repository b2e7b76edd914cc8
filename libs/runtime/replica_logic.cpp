#include "libs/runtime/replica_logic.hpp"

#include "libs/wire/client.hpp"
#include "loom/v1/replica.pb.h"

#include <cstdio>

namespace loom::runtime {

handled not_leader(const leadership& l, const std::string& service, const std::string& node_id) {
  const auto v = l.snapshot();
  loom::v1::NotLeader nl;
  nl.set_service(service);
  nl.set_replica(node_id);
  nl.set_epoch(static_cast<std::uint64_t>(v.epoch));
  if ((v.lease_left_ms > 0 || v.leading) && v.leader != node_id) {  // never itself: a view from before it stepped down
    nl.set_leader(v.leader);
    nl.set_leader_endpoint(v.leader_endpoint);
  }
  handled h;
  h.code = errc::unavailable;
  h.message = node_id + " is a standby " + service + " replica; " +
              (nl.leader().empty() ? std::string("it knows of no leader yet (a takeover is under way, or it has just stepped down): retry")
                                   : "the leader is " + nl.leader() + " at " + nl.leader_endpoint() + " (epoch " +
                                         std::to_string(v.epoch) + ")");
  h.type = std::string(wire::not_leader_type);
  h.body = nl.SerializeAsString();
  return h;
}

replica_logic::replica_logic(const leadership& l, std::string service, std::string node_id,
                             std::function<std::unique_ptr<service_logic>()> make)
    : l_(l), service_(std::move(service)), node_id_(std::move(node_id)), make_(std::move(make)) {
  sync();
}

void replica_logic::sync() {
  const std::int64_t e = l_.epoch();
  if (e == epoch_) return;
  if (inner_) std::fprintf(stderr, "loom-%s: dropping the logic of epoch %lld\n", service_.c_str(),
                           static_cast<long long>(epoch_));
  inner_.reset();
  epoch_ = 0;
  if (e == 0) return;
  const auto t0 = std::chrono::steady_clock::now();
  inner_ = make_();  // throws -> the actor restarts and tries again
  epoch_ = e;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
  std::fprintf(stderr, "loom-%s: %s took over at epoch %lld: state loaded from the store in %lld ms\n",
               service_.c_str(), node_id_.c_str(), static_cast<long long>(e), static_cast<long long>(ms.count()));
}

handled replica_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  sync();
  if (type == replica_sync_type) return handled{};
  if (!inner_) return not_leader(l_, service_, node_id_);
  auto h = inner_->handle(type, body, ctx);
  // Failed while the lease moved (a write the fence refused): the caller
  // retries at the leader, under the same request id.
  if (h.code != errc::ok && l_.epoch() != epoch_) return not_leader(l_, service_, node_id_);
  return h;
}

void replica_logic::on_tick() {
  sync();
  if (inner_) inner_->on_tick();
}

}  // namespace loom::runtime
