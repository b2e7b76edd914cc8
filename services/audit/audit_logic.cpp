#include "services/audit/audit_logic.hpp"

#include "libs/auth/token.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/audit.pb.h"

#include <nlohmann/json.hpp>

#include <chrono>

namespace loom::audit_service {
namespace {
// A query answers at most this many events: keeps replies far below the frame cap.
constexpr std::uint32_t max_query = 10000;
// Longest token lifetime issued through the service: a year, as the bootstrap admin token.
constexpr std::uint64_t max_ttl_s = 365ULL * 24 * 3600;

std::int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}
}  // namespace

runtime::handled audit_logic::handle(const std::string& type, const std::string& body,
                                     const runtime::call_context& ctx) {
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
    event_filter f;
    f.source = req->source();
    f.after_source_seq = req->after_seq();
    f.request_id = req->request_id();
    f.job_id = req->job_id();
    f.after_seq = req->after_chain_seq();
    f.newest = req->newest();
    auto found = db_->with_read_transaction(
        [&](store::transaction& tx) { return query_events(tx, log_->keys(), f, limit); });
    if (!found) return fail(found.err());
    loom::v1::AuditQueryReply rep;
    for (auto& b : *found)
      if (!rep.add_events()->ParseFromString(b)) return fail(errc::corruption, "stored event does not parse");
    rep.set_total(log_->total());
    rep.set_anchored_seq(log_->anchored());
    return reply(rep);
  }
  if (is<loom::v1::RotateKeysRequest>(type)) {
    auto req = parse_as<loom::v1::RotateKeysRequest>(body);
    if (!req) return fail(req.err());
    auto v = log_->keys().rotate(std::chrono::system_clock::now());
    if (!v) return fail(v.err());
    loom::v1::RotateKeysReply rep;
    rep.set_kek_version(*v);
    auto h = reply(rep);
    h.audit_payload = nlohmann::json{{"kek_version", *v}, {"scheduled", false}}.dump();
    return h;
  }
  if (is<loom::v1::IssueTokenRequest>(type)) return issue_token(body, ctx);
  return unknown_type("audit", type);
}

runtime::handled audit_logic::issue_token(const std::string& body, const runtime::call_context&) {
  using namespace runtime;
  auto req = parse_as<loom::v1::IssueTokenRequest>(body);
  if (!req) return fail(req.err());
  auto r = auth::role_from_string(req->role());
  if (!r) return fail(errc::invalid_argument,
                                  "role '" + auth::printable(req->role()) + "' is not viewer, operator or admin");
  if (req->zones().empty()) return fail(errc::invalid_argument, "a token needs at least one zone ('*' for all)");
  if (req->ttl_s() == 0 || req->ttl_s() > max_ttl_s)
    return fail(errc::invalid_argument, "ttl_s must be 1.." + std::to_string(max_ttl_s));
  // Names end up in audit listings and job ownership: checked here, as the
  // offline path checks them (auth::issue_token checks them again).
  if (auto st = auth::validate_name("principal", req->principal()); !st) return fail(st.err());
  if (!req->tenant().empty())
    if (auto st = auth::validate_name("tenant", req->tenant()); !st) return fail(st.err());
  auto key = auth::load_token_key(paths_.token_key());
  if (!key) return fail(key.err());
  auto epoch = auth::read_epoch(paths_.epoch());
  auto now = unix_now_s();
  std::vector<std::string> zones(req->zones().begin(), req->zones().end());
  auth::claims c{req->principal(), *r, zones, now + static_cast<std::int64_t>(req->ttl_s()), epoch ? *epoch : 0, now,
                 std::string(req->tenant().empty() ? auth::default_tenant : req->tenant())};
  auto tok = auth::issue_token(c, *key);
  if (!tok) return fail(tok.err());
  loom::v1::IssueTokenReply rep;
  rep.set_token(*tok);
  rep.set_principal(c.principal);
  rep.set_role(std::string(auth::to_string(c.r)));
  for (auto& z : zones) rep.add_zones(z);
  rep.set_expires_unix_s(c.expires_unix_s);
  rep.set_epoch(c.epoch);
  rep.set_tenant(c.tenant);
  auto h = reply(rep);
  // What was issued, never the token.
  h.audit_payload = nlohmann::json{{"principal", c.principal}, {"role", auth::to_string(c.r)}, {"zones", zones},
                                   {"tenant", c.tenant}, {"expires_unix_s", c.expires_unix_s}, {"epoch", c.epoch}}
                        .dump();
  return h;
}

}  // namespace loom::audit_service
