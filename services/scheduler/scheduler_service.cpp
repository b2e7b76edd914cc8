#include "services/scheduler/scheduler_service.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/service.hpp"
#include "libs/store/database.hpp"
#include "services/scheduler/dataset_probe.hpp"
#include "services/scheduler/scheduler_logic.hpp"

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

}  // namespace

std::unique_ptr<runtime::service_logic> make_logic(runtime::service_env& env, const scheduler_config& cfg) {
  audit::emitter* em = env.audit;
  std::string zone = env.zone, node = env.node_id;
  auto on_event = [em, zone, node](const job_rec& j, const job_event& e) {
    em->emit(audit::service_record(node, zone, "scheduler", action_of(j, e), j.id, e.text,
                                   nlohmann::json{{"stage", e.stage}, {"job_state", j.state}, {"event_seq", e.seq}}
                                       .dump()));
  };
  auto logic = std::make_unique<scheduler_logic>(
      env.db, [] { return std::chrono::system_clock::now(); }, env.paths.root + "/jobs", on_event, cfg.min_runtime,
      open_writer(env.database_url));
  logic->set_dataset_probe(ingest_probe(env));
  logic->set_read_roots(layout::job_read_roots(env.paths, env.eps));
  return logic;
}

}  // namespace loom::scheduler
