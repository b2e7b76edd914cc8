#include "services/audit/audit_logic.hpp"

#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/store/database.hpp"
#include "loom/v1/audit.pb.h"
#include "services/audit/archive.hpp"
#include "services/audit/wire.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace loom::audit_service {
namespace {

using namespace runtime;

// A query answers at most this many events: keeps replies far below the frame cap.
constexpr std::uint32_t max_query = 10000;
// Longest token lifetime issued through the service: a year, as the bootstrap admin token.
constexpr std::uint64_t max_ttl_s = 365ULL * 24 * 3600;

}  // namespace

audit_logic::audit_logic(std::shared_ptr<audit_log> log, store::database* db, layout::paths paths)
    : log_(std::move(log)), db_(db), paths_(std::move(paths)) {
  using namespace loom::v1;
  using ctx_t = const call_context&;
  table_
      // The highest source_seq stored for an emitter's source: it trims its spool to it (emitters, admins).
      .on<AuditWatermarkRequest>([this](const AuditWatermarkRequest& r, ctx_t c) { return watermark(r, c); })
      // Stored events by source, request, job, chain position or the newest N, payloads decrypted;
      // a non-admin's only of its tenant.
      .on<AuditQueryRequest>([this](const AuditQueryRequest& r, ctx_t c) { return query(r, c); })
      // A new key-encryption key now (`loom keys rotate`); audited with its version.
      .on<RotateKeysRequest>([this](const RotateKeysRequest& r, ctx_t) { return rotate_keys(r); })
      // The oldest records, past the retention, to an archive file (`loom audit archive`); audited,
      // refusals included (a younger cut-off, the store's triggers).
      .on<AuditArchiveRequest>([this](const AuditArchiveRequest& r, ctx_t) { return archive(r); })
      // A signed token for a principal, role, zones and tenant (`loom token issue`); audited, never the token.
      .on<IssueTokenRequest>([this](const IssueTokenRequest& r, ctx_t) { return issue_token(r); });
}

handled audit_logic::watermark(const loom::v1::AuditWatermarkRequest& req, const call_context& ctx) {
  // Emitters ask it to trim their spools: this deployment's services (their
  // own keys), and what mints with the token key (service tokens: the
  // services', the CLI's spool). For anyone else it only tells how busy each
  // source is.
  const bool emitter = auth::parse_peer(ctx.peer).kind == auth::peer_kind::own_service ||
                       auth::is_service_token(ctx.principal);
  if (!emitter && ctx.role != "admin")
    return fail(errc::permission_denied, "AuditWatermark is for the audit emitters (this deployment's service keys) "
                                         "and admins, not " +
                                             (ctx.principal.empty() ? std::string("an anonymous caller")
                                                                    : auth::printable(ctx.principal)) +
                                             " over " + (ctx.peer.empty() ? std::string("no key") : ctx.peer));
  loom::v1::AuditWatermarkReply rep;
  rep.set_stored_seq(log_->watermark(req.source()));
  return reply(rep);
}

handled audit_logic::query(const loom::v1::AuditQueryRequest& req, const call_context& ctx) {
  const std::uint32_t limit = req.limit() == 0 || req.limit() > max_query ? max_query : req.limit();
  event_filter f = filter_from_wire(req);
  // Tenant walls: another tenant's records, and those of no tenant, are not
  // there for a non-admin (a job id of another tenant finds nothing).
  if (ctx.role != "admin") f.tenant = ctx.tenant;
  auto found = db_->with_read_transaction(
      [&](store::transaction& tx) { return query_events(tx, log_->keys(), f, limit); });
  if (!found) return fail(found.err());
  loom::v1::AuditQueryReply rep;
  if (auto st = query_reply_to_wire(*found, log_->total(), log_->anchored(), &rep); !st) return fail(st.err());
  return reply(rep);
}

handled audit_logic::rotate_keys(const loom::v1::RotateKeysRequest&) {
  auto v = log_->keys().rotate(loom::wall_now());
  if (!v) return fail(v.err());
  loom::v1::RotateKeysReply rep;
  rep.set_kek_version(*v);
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"kek_version", *v}, {"scheduled", false}}.dump();
  return h;
}

handled audit_logic::archive(const loom::v1::AuditArchiveRequest& req) {
  const auto retention = log_->retention();
  const std::chrono::days older_than{req.older_than_days() == 0 ? retention.count() : req.older_than_days()};
  if (older_than < retention)
    return fail(errc::permission_denied,
                "audit records are kept " + std::to_string(retention.count()) +
                    " days (the retention; LOOM_AUDIT_RETENTION_DAYS, 180 at least): records younger than that "
                    "are never archived or deleted, so --older-than-days " +
                    std::to_string(req.older_than_days()) + " is refused");
  archive_request ar;
  ar.older_than = older_than;
  ar.dry_run = req.dry_run();
  auto done = archive_old(*db_, paths_.audit_archive(), ar, log_->now());
  if (!done) {
    // The store's own refusal (its triggers: younger than 180 days by the
    // database's clock, unarchived, the newest) is a denial like ours.
    const auto& m = done.err().message;
    const bool store_refused = m.find("retention") != std::string::npos ||
                               m.find("never deleted") != std::string::npos ||
                               m.find("audit_archives holds it") != std::string::npos;
    return fail(store_refused ? errc::permission_denied : done.code(), m);
  }
  loom::v1::AuditArchiveReply rep;
  archive_to_wire(*done, static_cast<std::uint32_t>(older_than.count()), &rep);
  auto h = reply(rep);
  h.audit_payload = nlohmann::json{{"first_seq", rep.first_seq()}, {"last_seq", rep.last_seq()},
                                   {"rows", rep.rows()},           {"file", rep.file()},
                                   {"sha256", rep.sha256()},       {"dry_run", rep.dry_run()},
                                   {"older_than_days", rep.older_than_days()}}
                        .dump();
  return h;
}

handled audit_logic::issue_token(const loom::v1::IssueTokenRequest& wire_req) {
  const token_request req = token_request_from_wire(wire_req);
  auto r = auth::role_from_string(req.role);
  if (!r)
    return fail(errc::invalid_argument, "role '" + auth::printable(req.role) + "' is not viewer, operator or admin");
  if (req.zones.empty()) return fail(errc::invalid_argument, "a token needs at least one zone ('*' for all)");
  if (req.ttl_s == 0 || req.ttl_s > max_ttl_s)
    return fail(errc::invalid_argument, "ttl_s must be 1.." + std::to_string(max_ttl_s));
  // Names end up in audit listings and job ownership: checked here, as the
  // offline path checks them (auth::issue_token checks them again).
  if (auto st = auth::validate_name("principal", req.principal); !st) return fail(st.err());
  if (auto ok = auth::issuable_principal(req.principal); !ok.ok) return fail(errc::permission_denied, ok.why);
  if (!req.tenant.empty())
    if (auto st = auth::validate_name("tenant", req.tenant); !st) return fail(st.err());
  auto key = auth::load_token_key(paths_.token_key());
  if (!key) return fail(key.err());
  auto epoch = auth::read_epoch(paths_.epoch());
  auto now = unix_now_s();
  auth::claims c{req.principal, *r, req.zones, now + static_cast<std::int64_t>(req.ttl_s), epoch ? *epoch : 0, now,
                 std::string(req.tenant.empty() ? auth::default_tenant : req.tenant)};
  auto tok = auth::issue_token(c, *key);
  if (!tok) return fail(tok.err());
  loom::v1::IssueTokenReply rep;
  to_wire(c, *tok, &rep);
  auto h = reply(rep);
  // What was issued, never the token.
  h.audit_payload = nlohmann::json{{"principal", c.principal}, {"role", auth::to_string(c.r)}, {"zones", c.zones},
                                   {"tenant", c.tenant}, {"expires_unix_s", c.expires_unix_s}, {"epoch", c.epoch}}
                        .dump();
  return h;
}

}  // namespace loom::audit_service
