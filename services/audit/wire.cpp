#include "services/audit/wire.hpp"

#include "loom/v1/audit.pb.h"

namespace loom::audit_service {

std::optional<received_event> event_from_wire(const std::string& bytes) {
  loom::v1::AuditEvent e;
  if (!e.ParseFromString(bytes) || e.source().empty() || e.source_seq() == 0) return std::nullopt;
  received_event out;
  auditchain::chain_row& r = out.row;
  r.unix_ns = static_cast<std::int64_t>(e.unix_ns());
  r.source = e.source();
  r.source_seq = e.source_seq();
  r.service = e.service();
  r.peer_key = e.peer_key();
  r.principal = e.principal();
  r.role = e.role();
  r.zone = e.zone();
  r.action = e.action();
  r.job_id = e.job_id();
  r.request_id = e.request_id();
  r.decision = static_cast<std::int32_t>(e.decision());
  r.reason = e.reason();
  r.tenant = e.tenant();
  r.version = auditchain::current_row_version;  // every row stored from now on hashes its tenant
  out.payload = std::move(*e.mutable_payload());
  return out;
}

std::string event_to_wire(const auditchain::chain_row& r, const std::string& payload,
                          const std::string& payload_state) {
  loom::v1::AuditEvent e;
  e.set_seq(r.seq);
  e.set_source(r.source);
  e.set_source_seq(r.source_seq);
  e.set_unix_ns(static_cast<std::uint64_t>(r.unix_ns));
  e.set_principal(r.principal);
  e.set_role(r.role);
  e.set_zone(r.zone);
  e.set_action(r.action);
  e.set_job_id(r.job_id);
  e.set_request_id(r.request_id);
  e.set_decision(static_cast<loom::v1::Decision>(r.decision));
  e.set_reason(r.reason);
  e.set_service(r.service);
  e.set_peer_key(r.peer_key);
  e.set_tenant(r.tenant);
  e.set_payload(payload);
  e.set_payload_state(payload_state);
  return e.SerializeAsString();
}

event_filter filter_from_wire(const loom::v1::AuditQueryRequest& q) {
  event_filter f;
  f.source = q.source();
  f.after_source_seq = q.after_seq();
  f.request_id = q.request_id();
  f.job_id = q.job_id();
  f.after_seq = q.after_chain_seq();
  f.newest = q.newest();
  return f;
}

status query_reply_to_wire(const std::vector<std::string>& events, std::uint64_t total, std::uint64_t anchored,
                           loom::v1::AuditQueryReply* out) {
  for (const auto& b : events)
    if (!out->add_events()->ParseFromString(b)) return make_error(errc::corruption, "stored event does not parse");
  out->set_total(total);
  out->set_anchored_seq(anchored);
  return ok_status();
}

token_request token_request_from_wire(const loom::v1::IssueTokenRequest& r) {
  token_request t;
  t.principal = r.principal();
  t.role = r.role();
  t.tenant = r.tenant();
  t.zones.assign(r.zones().begin(), r.zones().end());
  t.ttl_s = r.ttl_s();
  return t;
}

void to_wire(const auth::claims& c, const std::string& token, loom::v1::IssueTokenReply* out) {
  out->set_token(token);
  out->set_principal(c.principal);
  out->set_role(std::string(auth::to_string(c.r)));
  for (const auto& z : c.zones) out->add_zones(z);
  out->set_expires_unix_s(c.expires_unix_s);
  out->set_epoch(c.epoch);
  out->set_tenant(c.tenant);
}

void archive_to_wire(const archive_outcome& o, std::uint32_t older_than_days, loom::v1::AuditArchiveReply* out) {
  out->set_first_seq(o.entry.first_seq);
  out->set_last_seq(o.entry.last_seq);
  out->set_rows(o.entry.rows);
  out->set_file(o.entry.file);
  out->set_sha256(o.entry.sha256);
  out->set_oldest_unix_ns(o.entry.oldest_ns);
  out->set_newest_unix_ns(o.entry.newest_ns);
  out->set_why_none(o.why_none);
  out->set_dry_run(o.dry_run);
  out->set_older_than_days(older_than_days);
  out->set_live_first_seq(o.live_first);
}

}  // namespace loom::audit_service
