// The audit service's request logic: watermarks for emitters and queries
// over the stored events. The store is shared with the receiver thread and
// outlives restarts of the service actor.
#pragma once

#include "libs/runtime/service_logic.hpp"
#include "services/audit/event_store.hpp"

#include <memory>

namespace loom::audit_service {

class audit_logic final : public runtime::service_logic {
 public:
  explicit audit_logic(std::shared_ptr<event_store> store) : store_(std::move(store)) {}
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;

 private:
  std::shared_ptr<event_store> store_;
};

}  // namespace loom::audit_service
