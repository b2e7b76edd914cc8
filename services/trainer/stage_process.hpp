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
//                                                 scored (an hpo trial's rung),
//                                                 then done | error | crash
//   stdin ──── "shed <why>" lines ──────────────▶ run_options::shed (load shedding)
//   fd 4 ◀──── count + floats ───────────────────  a group member's all-reduce
//        ───── 1 + sums | 0 + error ────────────▶ (relayed to the service's group)
//   SIGTERM on stop ────────────────────────────▶ snapshot of the last whole step, done (stopped)
//   the child dies with the parent (PR_SET_PDEATHSIG)
//
// A child that ends without a result (a signal, the kernel's memory kill, an
// allocation failure under setrlimit) is a stage_crash naming the cause.
// Which stages run so: the service's choice (LOOM_STAGE_PROCESSES,
// services/trainer/README.md). An hpo trial runs so too: the child scores the
// held-out text at the trial's rung itself (trial_scorer) and ends there
// after its snapshot, and the parent records the score it reports. A group
// member runs so too: the group (its sockets, the collective inbox) stays
// the service's, and each all-reduce of the child is relayed over fd 4 (a
// socketpair: the count and the floats there, the sums or the error back)
// through the parent, which keeps serving the child's events meanwhile only
// between exchanges (the child waits on the answer anyway). A diloco site
// keeps its hooks in the service (its sync thread) and runs in its training
// thread.
#pragma once

#include "libs/runtime/process_box.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/run/training_run.hpp"

#include <cstdint>
#include <functional>
#include <span>
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
  // An hpo trial (stop_at > 0): the child scores `eval_text` (trial_scorer)
  // after step stop_at, reports it (stage_process_options::on_scored), and
  // ends there after that step's snapshot unless stop_at is the last step; it
  // never resumes from past stop_at (run_options::resume_at_most).
  std::uint64_t trial_stop_at = 0;
  std::string trial_eval_text;
  // A group member (world > 1): member `rank` of `world` (run_options::group);
  // its all-reduce is relayed through the parent (stage_process_options::all_reduce_sum).
  std::uint32_t group_rank = 0, group_world = 1;
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
  // An hpo trial's validation loss at its rung, as the child measured it.
  std::function<void(std::uint64_t step, double loss)> on_scored;
  // A group member's exchange, which the parent runs for the child over the
  // group this service joined; its answer (or error) goes back to the child.
  std::function<status(std::span<float>)> all_reduce_sum;
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
