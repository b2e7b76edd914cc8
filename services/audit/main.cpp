// loom-audit: receives every service's AuditEvents (PUSH -> PULL) and stores
// them in the region's hash chain (audit_events: sealed payloads, signed
// checkpoints, external anchor file); answers watermark and query requests,
// rotates the key-encryption key and issues tokens (both audited).
#include "libs/audit/emitter.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/runtime/service.hpp"
#include "services/audit/audit_logic.hpp"
#include "services/audit/receiver.hpp"
#include "services/audit/schema.hpp"

#include <zmq.hpp>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

// $LOOM_AUDIT_KEK_ROTATION_DAYS / $LOOM_AUDIT_RETENTION_DAYS override the
// defaults (30 / 180; the retention never below 180).
int env_days(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  int d = std::atoi(v);
  return d > 0 ? d : fallback;
}

}  // namespace

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
    audit_service::audit_log_options o;
    o.url = env.database_url;
    o.keys_dir = env.paths.audit_keys();
    o.anchor_path = env.paths.audit_anchors();
    o.keyring.kek_rotation = std::chrono::days(env_days("LOOM_AUDIT_KEK_ROTATION_DAYS", 30));
    o.keyring.retention =
        std::max(auditchain::min_retention, std::chrono::days(env_days("LOOM_AUDIT_RETENTION_DAYS", 180)));
    // Scheduled rotations and purges are operations of their own: audited
    // through this service's emitter like any other (emit() only queues).
    audit::emitter* em = env.audit;
    std::string zone = env.zone;
    o.keyring.on_rotate = [em, zone](std::uint32_t version, bool scheduled) {
      audit::record r;
      r.principal = "loom-audit";
      r.role = "service";
      r.zone = zone;
      r.action = "key.rotate";
      r.reason = scheduled ? "scheduled: the key-encryption key reached its rotation age" : "requested";
      r.payload = "{\"kek_version\":" + std::to_string(version) + ",\"scheduled\":" + (scheduled ? "true" : "false") + "}";
      r.service = "audit";
      if (scheduled) em->emit(std::move(r));  // requested ones are the RotateKeysRequest's own record
    };
    o.on_purge = [em, zone](const std::vector<std::uint32_t>& days) {
      audit::record r;
      r.principal = "loom-audit";
      r.role = "service";
      r.zone = zone;
      r.action = "key.purge";
      std::string list;
      for (auto d : days) list += (list.empty() ? "" : ",") + auditchain::day_name(d);
      r.reason = "day keys past the retention destroyed: " + list;
      r.service = "audit";
      em->emit(std::move(r));
    };
    auto l = audit_service::audit_log::open(std::move(o));
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
    return std::make_unique<audit_service::audit_logic>(log, env.db, env.paths);
  };
  return runtime::service_main(static_cast<int>(args.size()), args.data(), spec);
}
