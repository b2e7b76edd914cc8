// wire: the audit service's protobuf <-> internal mapping, the only audit
// files besides the logic's handler table that see loom.v1 messages: a
// received AuditEvent into the chain row it becomes, a stored row back into an
// AuditEvent for queries, a query into its filter, a token request into plain
// values and the issued claims into the reply. Pure functions; any thread.
#pragma once

#include "libs/auditchain/row.hpp"
#include "libs/auth/token.hpp"
#include "libs/status/status.hpp"
#include "services/audit/archive.hpp"
#include "services/audit/audit_log.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::v1 {
class AuditQueryRequest;
class AuditQueryReply;
class IssueTokenRequest;
class IssueTokenReply;
class AuditArchiveReply;
}  // namespace loom::v1

namespace loom::audit_service {

// An AuditEvent as it arrived on the PULL socket: the chain row it becomes
// (seq, hashes and sealed payload are the writer's to fill) and its payload
// in clear.
struct received_event {
  auditchain::chain_row row;
  std::string payload;
};

// nullopt when `bytes` is not an AuditEvent or lacks its source or source_seq
// (the receiver counts it invalid).
std::optional<received_event> event_from_wire(const std::string& bytes);

// A stored row as a serialized AuditEvent: `payload` in clear, or empty with
// `payload_state` saying why (a destroyed day key, schema v1). Rows of schema
// v1 have seq 0 (not chained).
std::string event_to_wire(const auditchain::chain_row& r, const std::string& payload, const std::string& payload_state);

event_filter filter_from_wire(const loom::v1::AuditQueryRequest& q);

// The reply to a query: `events` from query_events. corruption when a stored
// event does not parse.
status query_reply_to_wire(const std::vector<std::string>& events, std::uint64_t total, std::uint64_t anchored,
                           loom::v1::AuditQueryReply* out);

// What IssueTokenRequest asks for, before any check.
struct token_request {
  std::string principal, role, tenant;  // tenant "" = the default tenant
  std::vector<std::string> zones;
  std::uint64_t ttl_s = 0;
};
token_request token_request_from_wire(const loom::v1::IssueTokenRequest& r);

void to_wire(const auth::claims& c, const std::string& token, loom::v1::IssueTokenReply* out);

// What an archive request did (or, dry, would do); `older_than_days` as applied.
void archive_to_wire(const archive_outcome& o, std::uint32_t older_than_days, loom::v1::AuditArchiveReply* out);

}  // namespace loom::audit_service
