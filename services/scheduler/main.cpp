// loom-scheduler: the control plane — the node roster and training jobs
// (stages placed on trainers by the scheduling policy), all in the state store.
// Every stored job event (placements, stage switches, snapshots, requeues,
// completion) is also an audit record naming its job.
#include "libs/audit/emitter.hpp"
#include "libs/layout/layout.hpp"
#include "libs/runtime/service.hpp"
#include "libs/store/database.hpp"
#include "services/scheduler/dataset_probe.hpp"
#include "services/scheduler/scheduler_logic.hpp"
#include "services/scheduler/schema.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>

namespace {

// "job.placed", "job.stage_succeeded", …; a later stage being queued is the
// pipeline's automatic stage switch.
std::string action_of(const loom::scheduler::job_rec& j, const loom::scheduler::job_event& e) {
  if (e.kind == "queued" && !j.stages.empty() && e.stage != j.stages.front().name) return "job.stage_switch";
  return "job." + e.kind;
}

// $LOOM_SCHEDULER_MIN_RUNTIME_S: seconds a stage runs before a higher-priority
// job may preempt it (default 60). Anything but a whole number >= 0 is refused.
std::optional<std::chrono::milliseconds> min_runtime_from_env() {
  const char* v = std::getenv("LOOM_SCHEDULER_MIN_RUNTIME_S");
  if (!v || !*v) return loom::scheduler::job_manager::default_min_runtime;
  std::uint64_t s = 0;
  const auto r = std::from_chars(v, v + std::strlen(v), s);
  if (r.ec != std::errc() || *r.ptr != '\0' || s > 86'400 * 365) return std::nullopt;
  return std::chrono::milliseconds(s * 1000);
}

// A second connection for the job tables' group commit; without one (no
// store URL, or it cannot be opened) every job change commits on its own.
std::unique_ptr<loom::store::database> open_writer(const std::string& url) {
  if (url.empty()) return nullptr;
  auto db = loom::store::database::open(url);
  if (!db) {
    std::fprintf(stderr, "loom-scheduler: no group-commit connection (%s); committing each change alone\n",
                 db.err().to_string().c_str());
    return nullptr;
  }
  return std::move(*db);
}

}  // namespace

int main(int argc, char** argv) {
  const auto min_runtime = min_runtime_from_env();
  if (!min_runtime) {
    std::fprintf(stderr, "loom-scheduler: LOOM_SCHEDULER_MIN_RUNTIME_S=%s is not a number of seconds (0..31536000)\n",
                 std::getenv("LOOM_SCHEDULER_MIN_RUNTIME_S"));
    return 2;
  }
  loom::runtime::service_spec spec;
  spec.name = "scheduler";
  spec.migrations = loom::scheduler::scheduler_migrations;
  spec.make_logic = [min = *min_runtime](loom::runtime::service_env& env) {
    loom::audit::emitter* em = env.audit;
    std::string zone = env.zone, node = env.node_id;
    auto on_event = [em, zone, node](const loom::scheduler::job_rec& j, const loom::scheduler::job_event& e) {
      em->emit(loom::audit::service_record(
          node, zone, "scheduler", action_of(j, e), j.id, e.text,
          nlohmann::json{{"stage", e.stage}, {"job_state", j.state}, {"event_seq", e.seq}}.dump()));
    };
    auto logic = std::make_unique<loom::scheduler::scheduler_logic>(
        env.db, [] { return std::chrono::system_clock::now(); }, env.paths.root + "/jobs", on_event, min,
        open_writer(env.database_url));
    logic->set_dataset_probe(loom::scheduler::ingest_probe(env));
    logic->set_read_roots(loom::layout::job_read_roots(env.paths, env.eps));
    return logic;
  };
  return loom::runtime::service_main(argc, argv, spec);
}
