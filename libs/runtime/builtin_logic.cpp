#include "libs/runtime/builtin_logic.hpp"
#include "libs/status/unix_time.hpp"

#include "loom/v1/service.pb.h"

#include <chrono>
#include <stdexcept>

namespace loom::runtime {

builtin_logic::builtin_logic(std::string service, std::unique_ptr<service_logic> inner)
    : service_(std::move(service)), inner_(std::move(inner)), table_(service_) {
  using namespace loom::v1;
  table_
      // Proves the service actor is alive; echoes who the gateway says called.
      .on<PingRequest>([this](const PingRequest& req, const call_context& ctx) {
        PingReply rep;
        rep.set_payload(req.payload());
        rep.set_service(service_);
        rep.set_unix_ns(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                       loom::wall_now().time_since_epoch())
                                                       .count()));
        rep.set_principal(ctx.principal);
        rep.set_role(ctx.role);
        rep.set_tenant(ctx.tenant);
        return reply(rep);
      })
      // Admin only: makes the actor fail, so supervision can be seen working.
      .on<CrashRequest>([](const CrashRequest& req, const call_context& ctx) -> handled {
        throw std::runtime_error("crash requested by " + ctx.principal +
                                 (req.reason().empty() ? "" : ": " + req.reason()));
      });
}

handled builtin_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  if (table_.handles(type) || !inner_) return table_.dispatch(type, body, ctx);
  return inner_->handle(type, body, ctx);
}

}  // namespace loom::runtime
