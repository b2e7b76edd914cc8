// The audit service's request logic: watermarks for emitters (from the
// audit_log shared with the receiver thread; it outlives restarts of the
// service actor) and queries over the stored events (through the actor's own
// state-store connection).
#pragma once

#include "libs/runtime/service_logic.hpp"
#include "services/audit/audit_log.hpp"

#include <memory>

namespace loom::audit_service {

class audit_logic final : public runtime::service_logic {
 public:
  audit_logic(std::shared_ptr<audit_log> log, store::database* db) : log_(std::move(log)), db_(db) {}
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;

 private:
  std::shared_ptr<audit_log> log_;
  store::database* db_;
};

}  // namespace loom::audit_service
