// The audit service's request logic: watermarks for emitters (from the
// audit_log shared with the receiver thread; it outlives restarts of the
// service actor), queries over the stored events with payloads decrypted
// (through the actor's own state-store connection), key rotation, and token
// issue (minted here so every issue is an audited request). Requests reach
// their handler through a handler_table built in the constructor.
// Who reads what: an admin every record; anyone else only its token's
// tenant's records; watermarks only the emitters (this deployment's service
// keys, service-minted tokens) and admins (permission_denied otherwise).
#pragma once

#include "libs/layout/layout.hpp"
#include "libs/runtime/handler_table.hpp"
#include "libs/runtime/service_logic.hpp"
#include "services/audit/audit_log.hpp"

#include <memory>

namespace loom::v1 {
class AuditWatermarkRequest;
class AuditQueryRequest;
class RotateKeysRequest;
class AuditArchiveRequest;
class IssueTokenRequest;
}  // namespace loom::v1

namespace loom::audit_service {

class audit_logic final : public runtime::service_logic {
 public:
  audit_logic(std::shared_ptr<audit_log> log, store::database* db, layout::paths paths);
  runtime::handled handle(const std::string& type, const std::string& body,
                          const runtime::call_context& ctx) override {
    return table_.dispatch(type, body, ctx);
  }

 private:
  runtime::handled watermark(const loom::v1::AuditWatermarkRequest& req, const runtime::call_context& ctx);
  runtime::handled query(const loom::v1::AuditQueryRequest& req, const runtime::call_context& ctx);
  runtime::handled rotate_keys(const loom::v1::RotateKeysRequest& req);
  runtime::handled archive(const loom::v1::AuditArchiveRequest& req);
  runtime::handled issue_token(const loom::v1::IssueTokenRequest& req);

  std::shared_ptr<audit_log> log_;
  store::database* db_;
  layout::paths paths_;
  runtime::handler_table table_{"audit"};
};

}  // namespace loom::audit_service
