// The scheduler's service logic: the node roster's requests (RegisterNode,
// NodeHeartbeat, ListNodes, DrainNode). Runs inside the supervised service
// actor; holds no CAF, ZeroMQ or clock of its own (the clock is injected).
#pragma once

#include "libs/runtime/service_logic.hpp"
#include "services/scheduler/roster.hpp"

#include <functional>

namespace loom::scheduler {

class scheduler_logic final : public runtime::service_logic {
 public:
  using clock_fn = std::function<time_point()>;
  explicit scheduler_logic(clock_fn now = [] { return std::chrono::system_clock::now(); })
      : now_(std::move(now)) {}

  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;
  // Forgets nodes that have been dead for a minute.
  void on_tick() override;

  const roster& nodes() const { return roster_; }

 private:
  clock_fn now_;
  roster roster_;
};

}  // namespace loom::scheduler
