// loom-audit: receives every service's AuditEvents (PUSH -> PULL) and stores
// them in the region's hash chain (audit_events: sealed payloads, signed
// checkpoints, external anchor file); answers watermark and query requests,
// rotates the key-encryption key and issues tokens (both audited).
// Wiring only: config.hpp reads the settings, audit_service.hpp builds the
// parts, libs/runtime runs them.
#include "libs/auditchain/store_io.hpp"
#include "libs/runtime/service.hpp"
#include "services/audit/audit_service.hpp"
#include "services/audit/config.hpp"
#include "services/audit/schema.hpp"

#include <cstdio>
#include <cstdlib>

int main(int argc, char** argv) {
  using namespace loom;
  auto cfg =
      audit_service::load_config({argv, argv + argc}, [](const char* k) -> const char* { return std::getenv(k); });
  if (!cfg) {
    std::fprintf(stderr, "loom-audit: %s\n", cfg.err().message.c_str());
    return 2;
  }
  std::shared_ptr<audit_service::audit_log> log;  // the receiver thread's and every logic's
  runtime::service_spec spec;
  spec.name = "audit";
  spec.migrations = audit_service::audit_migrations;
  spec.store_url = auditchain::store_url;  // <data>/audit.db: not the scheduler's SQLite file
  spec.replicated = true;                  // audit, audit-2 ...: one stores the chain under the store's lease (issue 30)
  spec.start_extra = [&log, &c = *cfg](runtime::service_env& env) {
    return audit_service::start_receiver(env, c, log);
  };
  spec.make_logic = [&log](runtime::service_env& env) { return audit_service::make_logic(env, log); };
  std::vector<char*> args;
  for (auto& a : cfg->runtime_args) args.push_back(a.data());
  return runtime::service_main(static_cast<int>(args.size()), args.data(), spec);
}
