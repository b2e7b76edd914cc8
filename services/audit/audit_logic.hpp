// The audit service's request logic: watermarks for emitters (from the
// audit_log shared with the receiver thread; it outlives restarts of the
// service actor), queries over the stored events with payloads decrypted
// (through the actor's own state-store connection), key rotation, and token
// issue (minted here so every issue is an audited request).
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/runtime/service_logic.hpp"
#include "services/audit/audit_log.hpp"

#include <memory>

namespace loom::audit_service {

class audit_logic final : public runtime::service_logic {
 public:
  audit_logic(std::shared_ptr<audit_log> log, store::database* db, layout::paths paths)
      : log_(std::move(log)), db_(db), paths_(std::move(paths)) {}
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override;

 private:
  runtime::handled issue_token(const std::string& body, const runtime::call_context& ctx);

  std::shared_ptr<audit_log> log_;
  store::database* db_;
  layout::paths paths_;
};

}  // namespace loom::audit_service
