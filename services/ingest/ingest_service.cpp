#include "services/ingest/ingest_service.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/files/files.hpp"
#include "services/ingest/ingest_logic.hpp"
#include "services/ingest/roster.hpp"
#include "services/ingest/sync_service.hpp"

#include <cstdio>

namespace loom::ingest {

task_runner_options runner_options(runtime::service_env& env) {
  task_runner_options o;
  o.datasets_root = env.paths.root + "/datasets";
  o.database_url = env.database_url;
  audit::emitter* em = env.audit;
  o.audit = [em](audit::record r) { em->emit(std::move(r)); };
  o.zone = env.zone;
  o.node = env.node_id;
  o.state_dir = env.paths.state("ingest");
  if (auto st = files::make_dirs(env.paths.imports()); !st)
    std::fprintf(stderr, "loom-ingest: %s\n", st.err().to_string().c_str());
  std::vector<std::string> skipped;
  o.import_roots = layout::import_roots(env.paths, env.eps, &skipped);
  for (const auto& why : skipped) std::fprintf(stderr, "loom-ingest: not an import root: %s\n", why.c_str());
  std::string roots;
  for (const auto& r : o.import_roots) roots += " " + r;
  std::fprintf(stderr, "loom-ingest: import roots:%s\n", roots.c_str());
  return o;
}

result<std::shared_ptr<void>> start_parts(runtime::service_env& env, const ingest_config& c, ingest_handles& out) {
  auto tasks = std::make_shared<task_runner>(runner_options(env));
  audit::emitter* em = env.audit;
  auto s = sync_service::start({.data_dir = env.paths.root,
                                .keys = env.keys,
                                .bind = c.sync_bind.empty() ? runtime::data_bind(env) : c.sync_bind,
                                .tasks = tasks,
                                .audit = [em](audit::record r) { em->emit(std::move(r)); },
                                .zone = env.zone,
                                .node = env.node_id});
  if (!s) return s.err();
  std::shared_ptr<sync_service> sync = std::move(*s);
  out.tasks = tasks;
  out.sync = sync;
  return std::static_pointer_cast<void>(std::make_shared<std::pair<decltype(tasks), decltype(sync)>>(tasks, sync));
}

std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, const ingest_handles& h) {
  auto sync = h.sync.lock();  // alive: start_parts ran first and its handle is held
  ingest_parts parts;
  parts.tasks = h.tasks.lock();
  parts.db = env.db;
  parts.datasets_root = env.paths.root + "/datasets";
  // Peers on other hosts are told the advertised address, never 0.0.0.0.
  parts.sync_info = [sync, net = env.eps.net]() -> result<sync_endpoint> {
    auto r = sync->info();
    if (r) r->endpoint = layout::advertised(net, r->endpoint);
    return r;
  };
  parts.sync_grant = [sync](const std::string& peer_key, const std::string& tenant, const std::string& dataset,
                            const std::string& principal) { return sync->grant(peer_key, tenant, dataset, principal); };
  parts.pull = [sync](const std::string& tenant, const std::string& dataset, const std::string& endpoint,
                      const std::string& key, const std::string& source_tenant, const std::string& principal) {
    return sync->pull(tenant, dataset, endpoint, key, source_tenant, principal);
  };
  parts.trainer_nodes = [&env] { return trainer_nodes(env); };
  parts.own_trainer_nodes = [&env] { return trainer_nodes(env, env.zone); };
  return std::make_unique<ingest_logic>(std::move(parts));
}

}  // namespace loom::ingest
