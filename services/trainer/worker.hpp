// worker: the trainer service's work loop. Every second it polls the scheduler
// (PollWork) with what it is doing — the work_board's state, shared with the
// service logic that answers TrainerStatus — and its progress; an assignment
// starts a training thread that runs the stage with run_training(), always
// resuming from the stage directory's latest verified snapshot, so a restarted
// process or another trainer continues where the last one left off. `stop`
// (cancel, preemption) interrupts the step and snapshots the last whole one. A
// training thread that throws is restarted from its latest snapshot under a
// runtime::restart_policy (2 restarts in 10 minutes, with backoff), then the
// stage is reported failed. work_state.hpp draws the states. Each poll also
// reads the machine's pressure (load_shedder.hpp): a running stage lowers
// its micro-batch under it, and the scheduler hears the level.
//
// Owns two threads (poll, training); the destructor stops both within ~2 s
// (the training thread within about a layer's time, with a snapshot).
#pragma once

#include "libs/collective/ring.hpp"
#include "libs/runspec/run_config.hpp"
#include "services/trainer/wire.hpp"
#include "services/trainer/work_state.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <thread>
#include <vector>

namespace loom::runtime {
struct service_env;
}

namespace loom::trainer {

struct run_options;   // run/training_run.hpp
struct run_summary;   // run/training_run.hpp
struct stage_extras;  // stage_kinds.hpp
class load_shedder;   // load_shedder.hpp

class worker {
 public:
  worker(runtime::service_env& env, std::shared_ptr<work_board> board);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

 private:
  // What a stage needs besides its work_state: its assignment (wire.hpp)
  // and the notices (rollbacks, snapshot fallbacks) not yet acknowledged.
  struct stage_run : assigned_stage {
    explicit stage_run(assigned_stage a) : assigned_stage(std::move(a)) {}
    std::vector<stage_notice> notices;  // guarded by mu_
    std::string config_path;            // its config.toml, and the overrides placed on it (stage_config)
    std::vector<std::string> placed;
  };

  using outcome = std::pair<std::string, std::string>;  // succeeded|failed|stopped|regroup, and the message

  void poll_loop();
  void start(assigned_stage a);
  void train(std::shared_ptr<stage_run> run);
  // The stage's run: its config, the options every run shares, one setup
  // for its kind, then the run with its crash restarts (stage_kinds.cpp).
  outcome run_stage(stage_run& run);
  result<runspec::run_config> stage_config(stage_run& run);
  result<run_options> common_options(stage_run& run, const runspec::run_config& cfg);
  // Each kind's hooks on the run; an outcome when the stage ends before it runs.
  std::optional<outcome> setup_trial(stage_run& run, const runspec::run_config& cfg, run_options& o, stage_extras& x);
  std::optional<outcome> setup_site(stage_run& run, const runspec::run_config& cfg, run_options& o, stage_extras& x);
  std::optional<outcome> setup_group(stage_run& run, const runspec::run_config& cfg, run_options& o, stage_extras& x);
  outcome run_with_restarts(stage_run& run, const runspec::run_config& cfg, const run_options& o, stage_extras& x);
  // An hpo trial's score at its rung (measured here or in the stage's process): logged, on the board.
  void trial_scored(const stage_run& run, stage_extras& x, std::uint64_t step, double loss);
  // One attempt: in a child process of its own (stage_process.hpp) when the
  // service runs stages so and the stage is no diloco site (an hpo trial's
  // child scores itself; a group member's exchanges are relayed through this
  // service's group), else on this thread.
  result<run_summary> run_once(stage_run& run, const runspec::run_config& cfg, const run_options& o, stage_extras& x);
  void join_training();
  void request_stop();  // the flag the run checks, and the board's stopping
  // The rule on every file the stage reads (runspec/input_files.hpp: inside
  // layout::job_read_roots, the kind of file its key takes, under its cap),
  // an hpo trial's hpo.validation included: permission_denied (audited)
  // outside the roots. The scheduler checked at submit; this is the
  // trainer's own check, for what it is about to open.
  status confine_inputs(const runspec::run_config& cfg, const stage_run& run);

  runtime::service_env& env_;
  std::shared_ptr<work_board> board_;
  std::unique_ptr<collective::inbox> inbox_;  // null when it could not bind (groups then fail)
  std::unique_ptr<load_shedder> shedder_;      // read by the poll loop, asked by the training thread
  // LOOM_STAGE_PROCESSES=1: stages in child processes under limits; LOOM_STAGE_MEMORY_MB
  // overrides their memory limit (else twice the estimate + 1 GiB); LOOM_INJECT_LEAK=JOB:MIB
  // (tests) makes that job's child keep MIB more per step.
  bool stage_processes_ = false;
  std::string isolation_ = "the service's training thread";  // TrainerStatus.isolation
  std::uint64_t stage_memory_mb_ = 0;
  std::string leak_job_;
  std::uint64_t leak_mib_ = 0;
  std::mutex mu_;                       // guards current_ and its notices
  std::shared_ptr<stage_run> current_;  // null when idle
  std::atomic<bool> stop_training_{false};
  std::atomic<bool> quit_{false};
  std::condition_variable cv_;
  std::thread training_;
  std::thread poller_;
};

}  // namespace loom::trainer
