// Wraps a service's logic with the requests every service answers through
// its actor: Ping (proves the actor is alive) and Crash (an admin-only hook
// that makes the actor fail so supervision can be seen working).
#pragma once

#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"

#include <memory>
#include <string>

namespace loom::runtime {

class builtin_logic final : public service_logic {
 public:
  builtin_logic(std::string service, std::unique_ptr<service_logic> inner);
  handled handle(const std::string& type, const std::string& body, const call_context& ctx) override;
  void on_tick() override {
    if (inner_) inner_->on_tick();
  }

 private:
  std::string service_;
  std::unique_ptr<service_logic> inner_;
  handler_table table_;  // Ping, Crash; everything else goes to inner_
};

}  // namespace loom::runtime
