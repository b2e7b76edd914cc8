// stage_process: one stage run in a child process of its own, under the
// limits of a runtime::process_box (issue 30, item 2) — so a stage that
// leaks, crashes or is killed for memory takes only itself down; the trainer
// service reports the cause and restarts it from its latest snapshot
// (worker::run_with_restarts), and keeps serving.
//
//   trainer service (parent)                     loom-trainer stage-child (child)
//   ──────────────────────────                   ────────────────────────────────
//   spec → <out_dir>/stage-process.json  ──exec──▶ reads the spec, run_training()
//   fd 3 ◀── one JSON event per line ──────────── started, step, snapshot, notice,
//            replayed into run_options' hooks     rollback, anomaly, precision,
//                                                 then done | error | crash
//   stdin ──── "shed <why>" lines ──────────────▶ run_options::shed (load shedding)
//   SIGTERM on stop ────────────────────────────▶ snapshot of the last whole step, done (stopped)
//   the child dies with the parent (PR_SET_PDEATHSIG)
//
// A child that ends without a result (a signal, the kernel's memory kill, an
// allocation failure under setrlimit) is a stage_crash naming the cause.
// Which stages run so: the service's choice (LOOM_STAGE_PROCESSES,
// services/trainer/README.md); a group member, a diloco site and an hpo trial
// keep their hooks in the service and run in its training thread.
#pragma once

#include "libs/runtime/process_box.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/run/training_run.hpp"

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace loom::trainer {

struct stage_process_spec {
  std::string config;             // the stage's config.toml (as worker::stage_config wrote it)
  std::vector<std::string> sets;  // overrides the scheduler placed (model.init_from=...)
  std::string out_dir, init_from, data_dir, dataset_root;
  std::uint64_t leak_mib_per_step = 0;  // LOOM_INJECT_LEAK (tests): the child keeps this much more per step
  std::string node;                     // run_options::node
};

// The child ended without a result; what() is the cause, e.g. "killed by the
// kernel for memory at its limit of 1.2 GiB (cgroup v1)".
struct stage_crash : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct stage_process_options {
  std::string exe = "/proc/self/exe";  // a loom-trainer binary
  // Asked every 200 ms while the child runs; a non-empty answer is sent on
  // (the child's run_options::shed). Null: never.
  std::function<std::string()> shed;
  // Told the child's pid once it runs (the job's events name it).
  std::function<void(int pid)> on_spawn;
};

// Runs the stage in a child inside `box`, replaying its events into `o`'s
// hooks (on_started, on_step, on_snapshot, on_notice, on_rollback,
// on_anomaly, on_precision); *o.stop sends SIGTERM. The child's run_summary,
// or its error (as run_training's); throws stage_crash when it died without either.
result<run_summary> run_in_process(const stage_process_spec& s, const run_options& o, const runtime::process_box& box,
                                   const stage_process_options& po = {});

// `loom-trainer stage-child --spec FILE`: the child's side (not for people).
int stage_child_main(int argc, char** argv);

}  // namespace loom::trainer
