#include "services/scheduler/scheduler_service.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/admission.hpp"
#include "libs/runtime/service.hpp"
#include "libs/store/database.hpp"
#include "services/scheduler/dataset_probe.hpp"
#include "services/scheduler/remote_checkpoint.hpp"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/models/model_registry.hpp"
#include "libs/auth/token.hpp"
#include "services/scheduler/sites/site_registry.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>

namespace loom::scheduler {
namespace {

// "job.placed", "job.stage_succeeded", …; a later stage being queued is the
// pipeline's automatic stage switch.
std::string action_of(const job_rec& j, const job_event& e) {
  if (e.kind == "queued" && !j.stages.empty() && e.stage != j.stages.front().name) return "job.stage_switch";
  return "job." + e.kind;
}

// A second connection for the job tables' group commit; without one (no
// store URL, or it cannot be opened) every job change commits on its own.
std::unique_ptr<store::database> open_writer(const std::string& url) {
  if (url.empty()) return nullptr;
  auto db = store::database::open(url);
  if (!db) {
    std::fprintf(stderr, "loom-scheduler: no group-commit connection (%s); committing each change alone\n",
                 db.err().to_string().c_str());
    return nullptr;
  }
  return std::move(*db);
}

// What an enrolled site is told: where the cloud's scheduler, audit and
// aggregator listen (as `eps`, endpoints.json, says) and their public keys.
std::vector<cloud_service> cloud_services_of(const runtime::service_env& env, const layout::endpoints& eps) {
  std::vector<cloud_service> out;
  for (const char* name : {"scheduler", "audit", "aggregator"}) {
    const auto* ep = eps.find(name);
    auto key = wire::load_public_key(env.paths.curve_dir(), name);
    if (!key) continue;  // a deployment without it: nothing to tell
    cloud_service s{name, ep ? ep->rpc : "", *key, ep ? ep->pull : ""};
    if (std::string(name) == "scheduler") s.endpoint = env.rpc_endpoint;
    out.push_back(std::move(s));
  }
  return out;
}

cloud_info cloud_of(const runtime::service_env& env) {
  cloud_info c{env.zone, env.keys.public_z85, env.rpc_endpoint, cloud_services_of(env, env.eps), "", env.paths.epoch()};
  if (auto k = auth::load_token_key(env.paths.token_key())) c.token_key = *k;
  return c;
}

std::unique_ptr<site_registry> make_sites(runtime::service_env& env) {
  auto own = wire::load_allow_list(env.paths.curve_dir());
  auto* adm = env.admission;
  auto r = std::make_unique<site_registry>(
      env.db, [] { return loom::wall_now(); }, cloud_of(env), env.paths.sites_dir(),
      own ? *own : wire::allow_list{}, [adm] {
        if (adm) (void)adm->refresh();
      });
  // Read at each enrolment: on a cloud split over hosts the aggregator's
  // endpoints come from the other host (peers.json) after this one started.
  r->set_cloud_services([&env, eps = current_endpoints(env)] { return cloud_services_of(env, eps()); });
  if (auto st = r->sync_key_files(); !st)
    std::fprintf(stderr, "loom-scheduler: enrolled site keys in %s: %s\n", env.paths.sites_dir().c_str(),
                 st.err().to_string().c_str());
  else if (adm)
    (void)adm->refresh();
  return r;
}

}  // namespace

std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, const scheduler_config& cfg) {
  audit::emitter* em = env.audit;
  std::string zone = env.zone, node = env.node_id;
  // A job event's record names the scheduler as the one that acted and, when
  // a request caused it (a trainer's poll, a submit, a cancel), that request's
  // real caller: its CURVE key (the record's peer) and token principal.
  auto on_event = [em, zone, node](const job_rec& j, const job_event& e, const scheduler_logic::event_caller& by) {
    auto payload = nlohmann::json{{"stage", e.stage}, {"job_state", j.state}, {"event_seq", e.seq}};
    if (!by.peer.empty() || !by.principal.empty())
      payload["caller"] = {{"principal", by.principal}, {"role", by.role}, {"tenant", by.tenant},
                           {"peer", by.peer}, {"request_id", by.request_id}};
    auto r = audit::service_record(node, zone, "scheduler", action_of(j, e), j.id, e.text,
                                   payload.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    r.peer = by.peer;
    r.tenant = j.tenant;  // the job's tenant reads its job.* events (audit tenant walls)
    em->emit(std::move(r));
  };
  auto logic = std::make_unique<scheduler_logic>(
      env.db, [] { return loom::steady_wall_now(); }, env.paths.root + "/jobs", on_event, cfg.min_runtime,  // liveness and deadlines: immune to a clock step
      open_writer(env.database_url), env.zone);
  logic->set_metrics(env.metrics);
  logic->set_change_sink(env.notify);
  logic->set_checkpoint_check(split_cloud_check(env));  // here, or the aggregator's host (remote_checkpoint.hpp)
  logic->set_dataset_probe(ingest_probe(env));
  logic->set_read_roots(layout::job_read_roots(env.paths, env.eps));
  if (auto k = auth::load_token_key(env.paths.token_key())) logic->set_grant_key(*k);  // diloco stages' grants
  if (env.db)
    logic->set_models(std::make_unique<model_registry>(
        env.db, [] { return loom::wall_now(); }, split_cloud_inspector(env), env.paths.root));
  if (env.db)
    logic->set_sites(make_sites(env), [em, zone](const scheduler_logic::site_event& e) {
      audit::record r;
      r.principal = e.principal;
      r.role = e.role;
      r.zone = zone;
      r.action = e.action;
      r.outcome = e.refused ? audit::decision::deny : audit::decision::allow;
      r.reason = e.reason;
      r.payload = e.payload;
      r.service = "scheduler";
      em->emit(std::move(r));
    });
  return logic;
}

}  // namespace loom::scheduler
