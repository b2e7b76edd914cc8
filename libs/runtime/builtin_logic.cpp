#include "libs/runtime/builtin_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/service.pb.h"

#include <chrono>
#include <stdexcept>

namespace loom::runtime {

handled builtin_logic::handle(const std::string& type, const std::string& body, const call_context& ctx) {
  if (is<loom::v1::PingRequest>(type)) {
    auto req = parse_as<loom::v1::PingRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::PingReply rep;
    rep.set_payload(req->payload());
    rep.set_service(service_);
    rep.set_unix_ns(static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                   std::chrono::system_clock::now().time_since_epoch())
                                                   .count()));
    rep.set_principal(ctx.principal);
    rep.set_role(ctx.role);
    rep.set_tenant(ctx.tenant);
    return reply(rep);
  }
  if (is<loom::v1::CrashRequest>(type)) {
    auto req = parse_as<loom::v1::CrashRequest>(body);
    throw std::runtime_error("crash requested by " + ctx.principal +
                             (req && !req->reason().empty() ? ": " + req->reason() : ""));
  }
  if (!inner_) return unknown_type(service_, type);
  return inner_->handle(type, body, ctx);
}

}  // namespace loom::runtime
