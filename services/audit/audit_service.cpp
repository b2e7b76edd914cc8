#include "services/audit/audit_service.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/audit/record.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/leadership.hpp"
#include "services/audit/audit_logic.hpp"
#include "services/audit/receiver.hpp"

#include <zmq.hpp>

#include <string>
#include <vector>

namespace loom::audit_service {

result<std::shared_ptr<void>> start_receiver(runtime::service_env& env, const audit_config& c,
                                             std::shared_ptr<audit_log>& log) {
  audit_log_options o;
  o.url = env.database_url;
  o.keys_dir = env.paths.audit_keys();
  o.anchor_path = env.paths.audit_anchors();
  o.keyring.kek_rotation = c.kek_rotation;
  o.keyring.retention = c.retention;
  // Scheduled rotations and purges are operations of their own: audited
  // through this service's emitter like any other (emit() only queues).
  audit::emitter* em = env.audit;
  const std::string node = env.node_id, zone = env.zone;
  o.keyring.on_rotate = [em, node, zone](std::uint32_t version, bool scheduled) {
    if (!scheduled) return;  // requested ones are the RotateKeysRequest's own record
    em->emit(audit::service_record(node, zone, "audit", "key.rotate", "",
                                   "scheduled: the key-encryption key reached its rotation age",
                                   "{\"kek_version\":" + std::to_string(version) + ",\"scheduled\":true}"));
  };
  o.on_purge = [em, node, zone](const std::vector<std::uint32_t>& days) {
    std::string list;
    for (auto d : days) list += (list.empty() ? "" : ",") + auditchain::day_name(d);
    em->emit(audit::service_record(node, zone, "audit", "key.purge", "",
                                   "day keys past the retention destroyed: " + list));
  };
  auto l = audit_log::open(std::move(o));
  if (!l) return l.err();
  log = std::move(*l);
  // This process's own entry: audit-2 (--node-id audit-2@host) is a replica with its own PULL.
  const std::string instance = env.node_id.substr(0, env.node_id.find('@'));
  const auto* me = env.eps.find(layout::service_kind(instance) == "audit" ? instance : "audit");
  const std::string pull = !c.pull_bind.empty()          ? c.pull_bind
                           : me && !me->pull.empty() ? layout::bind_of(env.eps.net, me->pull)
                                                     : "tcp://" + env.eps.net.listen + ":*";
  try {
    std::function<bool()> leads;
    if (env.leader) leads = [leader = env.leader] { return leader->leading(); };
    return std::static_pointer_cast<void>(
        std::make_shared<receiver>(*env.ctx, env.keys, pull, log, env.metrics, std::move(leads)));
  } catch (const std::exception& e) {
    return make_error(errc::unavailable, "audit cannot listen on " + pull + ": " + e.what());
  }
}

std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, std::shared_ptr<audit_log> log) {
  return std::make_unique<audit_logic>(std::move(log), env.db, env.paths);
}

}  // namespace loom::audit_service
