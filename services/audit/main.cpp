// loom-audit: receives every service's AuditEvents (PUSH -> PULL) and stores
// them in the state store's append-only audit_events table; answers watermark
// and query requests. The hash chain,
// encryption and key rotation arrive with the audit issue.
#include "libs/runtime/service.hpp"
#include "services/audit/audit_logic.hpp"
#include "services/audit/receiver.hpp"
#include "services/audit/schema.hpp"

#include <zmq.hpp>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  using namespace loom;
  // --pull-bind overrides where the PULL socket binds (containers bind all
  // interfaces while peers use the endpoints.json name); the rest goes to service_main.
  std::string pull_bind;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--pull-bind" && i + 1 < argc) pull_bind = argv[++i];
    else args.push_back(argv[i]);
  }
  std::shared_ptr<audit_service::audit_log> log;
  runtime::service_spec spec;
  spec.name = "audit";
  spec.migrations = audit_service::audit_migrations;
  spec.start_extra = [&log, &pull_bind](runtime::service_env& env) -> result<std::shared_ptr<void>> {
    auto l = audit_service::audit_log::open(env.database_url);
    if (!l) return l.err();
    log = std::move(*l);
    const auto* me = env.eps.find("audit");
    std::string pull = !pull_bind.empty() ? pull_bind : me && !me->pull.empty() ? me->pull : "tcp://127.0.0.1:*";
    try {
      return std::static_pointer_cast<void>(
          std::make_shared<audit_service::receiver>(*env.ctx, env.keys, pull, log, env.metrics));
    } catch (const std::exception& e) {
      return make_error(errc::unavailable, "audit cannot listen on " + pull + ": " + e.what());
    }
  };
  spec.make_logic = [&log](runtime::service_env& env) {
    return std::make_unique<audit_service::audit_logic>(log, env.db);
  };
  return runtime::service_main(static_cast<int>(args.size()), args.data(), spec);
}
