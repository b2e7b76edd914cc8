// One audited operation, as services describe it. The emitter turns it into
// a loom.v1.AuditEvent with the source's gapless sequence number.
// Plain value type.
#pragma once

#include <cstdint>
#include <string>

namespace loom::audit {

enum class decision { allow = 1, deny = 2, error = 3 };

struct record {
  std::string principal;  // token principal ("" when the token did not verify)
  std::string role;
  std::string zone;
  std::string action;     // request type or named operation ("token.issue")
  std::string job_id;
  std::string request_id;
  decision outcome = decision::allow;
  std::string reason;     // why denied / what failed
  std::string payload;    // request-specific detail (bytes)
  std::string service;    // emitting service
  std::string peer;       // CURVE principal of the connection
  // The tenant whose trail the record belongs to (a request's token tenant, a
  // job event's job tenant); "" = no tenant's: admins only.
  std::string tenant;
  std::uint64_t unix_ns = 0;  // 0 = now
};

// What a service does on its own account (not answering a request): principal
// = the service's node id, role "service". The one way services build such a
// record, so every one carries the same who/where.
record service_record(std::string node_id, std::string zone, std::string service, std::string action,
                      std::string job_id = "", std::string reason = "", std::string payload = "");

// Serialized loom.v1.AuditEvent for `r` (source and seq set later by the emitter).
std::string encode(const record& r);

}  // namespace loom::audit
