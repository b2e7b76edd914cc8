// lm_run: one training run of kind lm or sft, as run_training() runs it
// (training_run.hpp) — the class both of its files share: training_run.cpp
// (its shape and limits, data, model, resume, loader) and lm_run_steps.cpp
// (the step loop, anomaly rollback, load shedding, snapshots). Internal to
// the trainer's run library.
#pragma once

#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"
#include "libs/engine/train_step.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/shards/loader.hpp"
#include "services/trainer/run/metrics_log.hpp"
#include "services/trainer/run/run_support.hpp"
#include "services/trainer/run/snapshot_io.hpp"
#include "services/trainer/run/training_run.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::trainer::detail {

using clock_type = std::chrono::steady_clock;

// One run, in the order it happens: check its shape and limits, prepare the
// data, build the model, resume or initialise it, then the step loop; each a
// method short enough to read at once. Not movable: the loader keeps a
// reference to the dataset.
class lm_run {
 public:
  lm_run(const runspec::run_config& c, const run_options& o)
      : c_(c), o_(o), g_(o.group), lead_(o.group.rank == 0),
        world_(std::max<std::uint32_t>(1, o.group.world)) {}
  lm_run(const lm_run&) = delete;
  lm_run& operator=(const lm_run&) = delete;

  result<run_summary> go() {
    for (auto step : {&lm_run::check_shape, &lm_run::check_limits, &lm_run::prepare_data, &lm_run::build_model,
                      &lm_run::resume_or_init, &lm_run::open_loader})
      if (auto st = (this->*step)(); !st) return st.err();
    if (auto st = loop(); !st) return st.err();
    return finish();
  }

 private:
  status check_shape();     // output dir, the group's rank and size
  status check_limits();    // threads within the cores, the memory estimate within the limit
  status prepare_data();    // shards: the dataset's, or made from data.text / data.sft / records
  status build_model();     // model and optimiser; out of memory halves the micro-batch
  status resume_or_init();  // a snapshot (agreed by the group), init_from, or random
  status resume_at_or_below(std::uint64_t limit);  // an hpo segment's end (run_options::resume_at_most)
  status open_loader();     // the data cursor, the metrics history, the step's buffers
  status loop();            // steps until the end or a stop
  result<bool> one_step();  // false: stopped
  status roll_back(shards::cursor bad_batch, const std::string& why);
  // Load shedding (issue 30): before a step, when run_options::shed says so.
  status shed();
  // The model made anew for micro-batch `batch` (a divisor of the current one),
  // accumulation raised to keep the tokens per step; the parameters, the
  // optimiser and the data cursor carry on.
  status rebatch(int batch);
  void size_buffers();  // the step's buffers for the current micro-batch
  status snapshot(std::uint64_t step);
  void unpack(int k);
  run_summary finish();
  // data.local: each member reads its node's share as a stream of its own,
  // only its own micro-batches of each step, so the members' cursors differ.
  // What snapshots, the skip list and the group agree on is the shared form
  // {0, windows read so far} (the same for every member: each reads
  // grad_accum / world batches of B windows per step); mine() maps it back to
  // this member's (epoch, position). Without data.local both are the identity.
  shards::cursor shared(shards::cursor mine) const;
  result<shards::loader> loader_at(shards::cursor shared);
  // The notice "data_locality": bytes read from shards placed on this node and elsewhere.
  void say_locality();

  runspec::run_config c_;  // batch and grad_accum may change on out-of-memory and load shedding
  const run_options& o_;
  const run_options::group_member& g_;
  const bool lead_;              // the member that writes out_dir
  const std::uint32_t world_;
  std::string ckpt_root_, work_dir_, data_dir_, run_hash_, key_, metrics_path_;
  int threads_ = 1;
  std::optional<shards::dataset> ds_;
  std::optional<engine::gpt2> model_;
  std::optional<engine::adamw> opt_;
  std::optional<opened_snapshot> resumed_;
  std::optional<shards::loader> ld_;
  shards::loader_options lo_;
  metrics_log metrics_;
  std::vector<float> recent_;  // losses so far, for the spike check
  std::vector<shards::cursor> skipped_;
  int rollbacks_ = 0;
  engine::precision_choice chosen_{};
  bool shed_exhausted_ = false;  // said once: nothing left to shed here
  run_summary sum_;
  std::uint64_t tokens_seen_ = 0, step_ = 0, total_ = 0, log_every_ = 1;
  engine::lr_schedule schedule_;
  // This member's micro-batches of a step: k = rank, rank + world, ... < grad_accum.
  std::size_t bt_ = 0;
  std::vector<std::uint32_t> in_u_, tg_u_;
  std::vector<std::vector<std::int32_t>> inputs_, targets_;
  std::vector<std::vector<float>> weights_;
  std::vector<engine::micro_batch> micro_;
  engine::data_parallel dp_;
  clock_type::time_point step_started_ = clock_type::now(), last_snapshot_time_ = clock_type::now();
};

}  // namespace loom::trainer::detail
