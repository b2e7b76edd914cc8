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
#include "services/trainer/run/run_config.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <span>
#include <string>

namespace loom::trainer {

struct run_options {
  bool resume = false;         // continue from out_dir's newest verified snapshot
  std::string data_dir;        // where keys/checkpoint.key lives (signs the manifests)
  std::ostream* log = nullptr; // progress lines; nullptr = silent
  // Checked after every step: true ends the run early with a snapshot.
  const std::atomic<bool>* stop = nullptr;
  // Where data.dataset names live: <dataset_root>/<name>/manifest.json.
  std::string dataset_root;
  // Called after every step (from the training thread) and after every snapshot.
  std::function<void(const step_record&)> on_step;
  std::function<void(const std::string& snapshot_dir)> on_snapshot;
  // After an anomaly rolled the run back: the step that failed, the snapshot's
  // step it went back to, and why (the trainer service audits it).
  std::function<void(std::uint64_t bad_step, std::uint64_t back_to, const std::string& why)> on_rollback;
  // Data parallelism (the trainer service's groups): member `rank` of `world`.
  // Every member runs the same config over the same data stream and computes
  // micro-batch k of each step when k % world == rank (world <= train.grad_accum);
  // all_reduce_sum sums gradients and losses over the group, so the numbers
  // are those of one trainer doing all the micro-batches, up to the order of
  // the float sums, and bitwise the same for the same world. Rank 0 alone
  // writes out_dir (snapshots, metrics.jsonl); every member starts from the
  // snapshot rank 0 starts from (agreed through the group at start), and the
  // others prepare their data under out_dir/rank-N/.
  struct group_member {
    std::uint32_t rank = 0, world = 1;
    std::function<status(std::span<float>)> all_reduce_sum;
  };
  group_member group;
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
};

// Anomalies (a non-finite loss or a loss spike, see run_config) roll back to
// the last snapshot and skip the batch; when the model does not fit in memory
// the micro-batch halves and accumulation doubles (tokens per step unchanged). Errors: invalid_argument (config),
// already_exists (checkpoints present without --resume), conflict (resuming a
// snapshot made with another config), corruption (data or every snapshot
// corrupt), internal (an anomaly with no snapshot yet or past
// anomaly.max_rollbacks: names the step; the last good snapshot stays LATEST).
result<run_summary> run_training(const run_config& c, const run_options& o);

}  // namespace loom::trainer
