// run_training: one training run from a run_config, top to bottom — data,
// model (random, init_from, or a resumed snapshot), the step loop, metrics,
// snapshots. What `loom-trainer train` runs; the trainer service (issue 6)
// runs the same function for an assignment.
//
//   out_dir/checkpoints/step-N/   snapshots (libs/ckpt), LATEST
//   out_dir/metrics.jsonl         one line per step (metrics_log.hpp)
//   out_dir/data/                 shards of data.text, when training on a text file
//
// Blocking; one run per out_dir at a time. Deterministic: the same config and
// thread count give bitwise-equal losses and parameters, also across a kill -9
// and --resume (the data cursor and optimiser state are in the snapshot).
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "libs/runspec/run_config.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace loom::trainer {

struct run_options {
  bool resume = false;         // continue from out_dir's newest verified snapshot
  // An hpo trial's segment, which ends at this step (0: none). The run
  // resumes from the newest snapshot at or below it; newer ones (trained
  // past it under a later segment that the scheduler lost in a restart) are
  // set aside, and with none at or below it the run starts afresh — training
  // is deterministic, so it arrives at the same step-N parameters. Resumed
  // exactly at it, the run trains nothing and calls outer.after_step(N, ...)
  // once, so a rung reached before is scored again.
  std::uint64_t resume_at_most = 0;
  std::string data_dir;        // where keys/checkpoint.key lives (signs the manifests)
  std::ostream* log = nullptr; // progress lines; nullptr = silent
  // Checked between layers of every step (gpt2::set_interrupt): true ends the
  // run within about a layer's time, with a snapshot of the last whole step.
  const std::atomic<bool>* stop = nullptr;
  // How long a step may go on after a stop request before it is interrupted:
  // shorter steps finish (and are kept), a long one ends within about a second.
  // Tests that stop at step boundaries on a loaded machine give it more.
  std::chrono::milliseconds interrupt_grace{300};
  // Where data.dataset names live: <dataset_root>/<name>/manifest.json.
  std::string dataset_root;
  // This trainer's node (the roster's id). With data.local the run reads only
  // the dataset's shards placed on it; either way the run says (notice
  // "data_locality") how many bytes it reads from shards placed here and
  // from shards placed on other nodes.
  std::string node;
  // Called once the data is ready and the model built or resumed, before the first step.
  std::function<void()> on_started;
  // Called after every step (from the training thread) and after every snapshot.
  std::function<void(const step_record&)> on_step;
  std::function<void(const std::string& snapshot_dir)> on_snapshot;
  // After an anomaly rolled the run back: the step that failed, the snapshot's
  // step it went back to, and why (the trainer service audits it).
  std::function<void(std::uint64_t bad_step, std::uint64_t back_to, const std::string& why)> on_rollback;
  // An anomalous step, before the rollback is tried: "non_finite" (loss or
  // gradient norm NaN/inf) or "spike" (the trainer counts them for alerts).
  std::function<void(const std::string& kind)> on_anomaly;
  // What the job's log must show besides steps: "snapshot_fallback" (the
  // newest snapshot was refused and an older one used) and "rollback" (an
  // anomaly), with a line of text each. The trainer service reports them.
  // Also "precision_changed": a resumed snapshot's steps ran in another
  // precision than this machine gives (note_precision_change).
  std::function<void(const std::string& kind, const std::string& text)> on_notice;
  // Once the model is built: what its matmuls run in (fp32 or bf16) and why.
  std::function<void(const std::string& used, const std::string& why)> on_precision;
  // The memory one run may plan for (its estimate, libs/model/memory.hpp, must
  // fit); 0 = 3/4 of this machine's physical memory.
  std::uint64_t memory_limit = 0;
  // Data parallelism (the trainer service's groups): member `rank` of `world`.
  // Every member runs the same config over the same data stream and computes
  // micro-batch k of each step when k % world == rank (world <= train.grad_accum);
  // all_reduce_sum sums gradients and losses over the group, so the numbers
  // are those of one trainer doing all the micro-batches, up to the order of
  // the float sums, and bitwise the same for the same world. Rank 0 alone
  // writes out_dir (snapshots, metrics.jsonl); every member starts from the
  // snapshot rank 0 starts from (agreed through the group at start), and the
  // others prepare their data under out_dir/rank-N/. With data.local each
  // member reads only its own micro-batches, from the shards placed on its
  // node (run_options::node): a stream per member, the same run for the same
  // placement and world (grad_accum a multiple of world).
  struct group_member {
    std::uint32_t rank = 0, world = 1;
    std::function<status(std::span<float>)> all_reduce_sum;
  };
  group_member group;
  // A diloco stage (issue 15): this run is one site of an aggregation. `start`
  // once the model is built or resumed and the data ready (the parameters
  // become the aggregator's global ones; with write_initial a fresh run first
  // snapshots step 0, the aggregation's initial parameters); `after_step`
  // after every inner step, with the step's tokens; `finish` after the last
  // step, before the final snapshot, which therefore holds what finish left
  // in the parameters (the global model). A run resumed at its last step has
  // nothing left to sync and calls none of them.
  struct outer_loop {
    bool write_initial = false;
    std::function<status(std::span<float> params)> start;
    std::function<status(std::uint64_t step, std::span<float> params, std::uint64_t tokens)> after_step;
    std::function<status(std::uint64_t step, std::span<float> params)> finish;
  };
  outer_loop outer;
  // Load shedding (issue 30): asked before every step. A non-empty answer
  // (why, with the numbers: "memory 95% of 8.0 GiB (...) >= 90%") halves the
  // micro-batch and doubles accumulation — the tokens per step, the data
  // order and the schedule unchanged — and says so (on_notice "load_shed").
  // A group member, or micro-batch 1, has nothing to lower: it says so once.
  // The trainer service answers from its pressure gauge, at most once per
  // fresh reading after the last shed.
  std::function<std::string()> shed;
  // Tests only: true = allocating a model of this micro-batch fails (out of memory).
  std::function<bool(int batch)> fail_alloc;
  // Tests only: replaces the loss of a step (1-based) to exercise the anomaly path.
  std::function<std::optional<float>(std::uint64_t step)> fault;
};

struct run_summary {
  std::uint64_t first_step = 0;  // where this invocation started (> 0 when resumed)
  std::uint64_t steps = 0;       // completed steps at the end
  float last_loss = 0;
  std::string snapshot;          // the last published snapshot directory
  std::string params_sha256;     // of the final parameters' bytes
  bool stopped = false;          // ended by *stop before config.steps
  std::string precision = "fp32";  // what the matmuls ran in (train.precision, as this CPU allows)
  // Alignment kinds (rm, dpo, rl; align_run.hpp): the held-out metrics at the end.
  std::vector<std::pair<std::string, double>> eval;
};

// Kinds rm, dpo and rl run align_run.hpp's loop (same snapshots, metrics
// log and resume; no anomaly rollback, no load shedding: a non-finite loss
// is an error).
// Anomalies (a non-finite loss or a loss spike, see run_config) roll back to
// the last snapshot and skip the batch; when the model does not fit in memory
// the micro-batch halves and accumulation doubles (tokens per step unchanged).
// Refused before anything is allocated: train.threads beyond this machine's
// cores (invalid_argument) and a memory estimate beyond memory_limit
// (resource_exhausted naming both). Errors: invalid_argument (config),
// already_exists (checkpoints present without --resume), conflict (resuming a
// snapshot made with another config), corruption (data or every snapshot
// corrupt), internal (an anomaly with no snapshot yet or past
// anomaly.max_rollbacks: names the step; the last good snapshot stays LATEST).
result<run_summary> run_training(const runspec::run_config& c, const run_options& o);

}  // namespace loom::trainer
