// loom::runtime::service_logic: the plain-C++ face of a service's logic, run
// inside an actor_host. No CAF here: logic classes are tested without actors.
// The host creates a logic object on an actor thread and serialises every call
// on it, so a logic needs no locking; it must not block for long.
#pragma once

#include <memory>
#include <string>

#include "libs/status/status.hpp"

namespace loom::runtime {

// Who asked, for authorisation and audit; filled by the gateway from the
// verified token (principal, role, tenant) and the service (zone).
struct call_context {
  std::string request_id;
  std::string principal;
  std::string role;
  std::string zone;
  // The token's tenant, never empty: "default" for tokens without one. Last,
  // so positional initialisers written before it keep their meaning.
  std::string tenant = "default";
  // The connection's CURVE principal (its ZAP user id): a key of this
  // deployment ("trainer", "client"), an enrolled edge site's
  // ("site:<site>:<service>", libs/runtime/admission.hpp) or "unenrolled".
  std::string peer{};
};

class commit_ticket;  // commit_ticket.hpp

// Outcome of one call: a status and, when ok, the reply message (type + body).
struct handled {
  errc code = errc::ok;
  std::string message;  // human-readable detail when code != ok
  std::string type;
  std::string body;
  // What the gateway's audit record of a mutating request carries besides
  // who/what/outcome: the job it concerns and request-specific detail
  // (encrypted at rest by the audit service). Never secrets.
  std::string audit_job_id;
  std::string audit_payload;
  // The tenant the record belongs to when the logic knows it better than the
  // token (a service's or a site's token acting for a job); "" = the token's
  // (auth::record_tenant). Tenants read only their own records.
  std::string audit_tenant;
  // Set when the effect is not yet durable (commit_ticket.hpp): the gateway
  // holds the reply until it resolves. Null: durable already (or read-only).
  std::shared_ptr<commit_ticket> durable;
};

class service_logic {
 public:
  virtual ~service_logic() = default;
  // One request. Throwing crashes the service actor: the host answers this
  // call with errc::unavailable and recreates the logic through its factory.
  virtual handled handle(const std::string& type, const std::string& body, const call_context& ctx) = 0;
  // Called every actor_host::options::tick; throwing crashes the actor as above.
  virtual void on_tick() {}
};

}  // namespace loom::runtime
