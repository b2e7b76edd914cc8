// replica_logic: a replicated service's logic while it may or may not lead
// (leadership.hpp). Standing by, it holds no logic at all and answers every
// request NotLeader; on becoming the leader it makes the service's logic from
// the store (the same start a restarted service makes), and on losing the
// lease it drops it, so a deposed replica neither ticks nor answers. The
// check is made at every call and tick, and the gateway posts sync_type when
// leadership changes, so a new leader loads before its first request.
#pragma once

#include "libs/runtime/leadership.hpp"
#include "libs/runtime/service_logic.hpp"

#include <functional>
#include <memory>
#include <string>

namespace loom::runtime {

// Posted to the actor when leadership changes (never sent over the wire:
// the gateway refuses types the policy table does not know).
inline constexpr const char* replica_sync_type = "loom.internal.ReplicaSync";

// A standby's answer: unavailable, naming the leader when one is known,
// with a loom.v1.NotLeader body (wire::not_leader_type).
handled not_leader(const leadership& l, const std::string& service, const std::string& node_id);

class replica_logic final : public service_logic {
 public:
  replica_logic(const leadership& l, std::string service, std::string node_id,
                std::function<std::unique_ptr<service_logic>()> make);
  handled handle(const std::string& type, const std::string& body, const call_context& ctx) override;
  void on_tick() override;

 private:
  void sync();

  const leadership& l_;
  std::string service_, node_id_;
  std::function<std::unique_ptr<service_logic>()> make_;
  std::unique_ptr<service_logic> inner_;
  std::int64_t epoch_ = 0;  // the epoch inner_ was made for (0: none)
};

}  // namespace loom::runtime
