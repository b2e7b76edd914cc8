#include "libs/audit/record.hpp"
#include "libs/status/unix_time.hpp"

#include "loom/v1/audit.pb.h"

#include <chrono>

namespace loom::audit {

record service_record(std::string node_id, std::string zone, std::string service, std::string action,
                      std::string job_id, std::string reason, std::string payload) {
  record r;
  r.principal = std::move(node_id);
  r.role = "service";
  r.zone = std::move(zone);
  r.service = std::move(service);
  r.action = std::move(action);
  r.job_id = std::move(job_id);
  r.reason = std::move(reason);
  r.payload = std::move(payload);
  return r;
}

std::string encode(const record& r) {
  loom::v1::AuditEvent e;
  e.set_unix_ns(r.unix_ns ? r.unix_ns
                          : static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                                           loom::wall_now().time_since_epoch())
                                                           .count()));
  e.set_principal(r.principal);
  e.set_role(r.role);
  e.set_zone(r.zone);
  e.set_action(r.action);
  e.set_job_id(r.job_id);
  e.set_request_id(r.request_id);
  e.set_decision(static_cast<loom::v1::Decision>(r.outcome));
  e.set_reason(r.reason);
  e.set_payload(r.payload);
  e.set_service(r.service);
  e.set_peer_key(r.peer);
  e.set_tenant(r.tenant);
  return e.SerializeAsString();
}

}  // namespace loom::audit
