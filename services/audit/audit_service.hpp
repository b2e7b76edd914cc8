// audit_service: the audit service's parts built from its config and the
// runtime's service_env — the audit log (its own store connection, the
// keyring with scheduled rotations and purges audited as this service's own
// records) and the PULL receiver, started once in start_extra; and the
// request logic, made at start and after every crash of the service actor.
// main.cpp only wires these to runtime::service_main.
#pragma once

#include "libs/runtime/service.hpp"
#include "services/audit/audit_log.hpp"
#include "services/audit/config.hpp"

#include <memory>

namespace loom::audit_service {

// Opens the audit log into `log` and binds the receiver (--pull-bind, else the
// pull endpoint in endpoints.json, else a free loopback port); the handle
// stops the receiver. unavailable when the PULL socket cannot be bound.
result<std::shared_ptr<void>> start_receiver(runtime::service_env& env, const audit_config& c,
                                             std::shared_ptr<audit_log>& log);

// REQUIRES: start_receiver succeeded (log is set).
std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, std::shared_ptr<audit_log> log);

}  // namespace loom::audit_service
