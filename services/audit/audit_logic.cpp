#include "services/audit/audit_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/audit.pb.h"

namespace loom::audit_service {
namespace {
// A query answers at most this many events: keeps replies far below the frame cap.
constexpr std::uint32_t max_query = 10000;
}  // namespace

runtime::handled audit_logic::handle(const std::string& type, const std::string& body,
                                     const runtime::call_context&) {
  using namespace runtime;
  if (is<loom::v1::AuditWatermarkRequest>(type)) {
    auto req = parse_as<loom::v1::AuditWatermarkRequest>(body);
    if (!req) return fail(req.err());
    loom::v1::AuditWatermarkReply rep;
    rep.set_stored_seq(log_->watermark(req->source()));
    return reply(rep);
  }
  if (is<loom::v1::AuditQueryRequest>(type)) {
    auto req = parse_as<loom::v1::AuditQueryRequest>(body);
    if (!req) return fail(req.err());
    std::uint32_t limit = req->limit() == 0 || req->limit() > max_query ? max_query : req->limit();
    auto found = db_->with_read_transaction([&](store::transaction& tx) {
      return query_events(tx, req->source(), req->after_seq(), req->request_id(), limit);
    });
    if (!found) return fail(found.err());
    loom::v1::AuditQueryReply rep;
    for (auto& b : *found)
      if (!rep.add_events()->ParseFromString(b)) return fail(errc::corruption, "stored event does not parse");
    rep.set_total(log_->total());
    return reply(rep);
  }
  return unknown_type("audit", type);
}

}  // namespace loom::audit_service
