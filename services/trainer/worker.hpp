// worker: the trainer service's work loop. Every second it polls the scheduler
// (PollWork) with what it is doing and its progress; an assignment starts a
// training thread that runs the stage with run_training() — always resuming
// from the stage directory's latest verified snapshot, so a restarted process
// or another trainer continues where the last one left off. `stop` (cancel,
// preemption) snapshots and ends the stage. A stage that throws is restarted
// from its latest snapshot up to 3 times before it is reported failed.
//
//   idle ──assignment──▶ running ──done──▶ succeeded | failed ──reported──▶ idle
//                           │ stop, or a new generation
//                           ├──▶ stopped (snapshot written) ──reported──▶ idle
//                           │ the group's exchange failed
//                           └──▶ regroup ──reported──▶ idle (the new generation follows)
//
// Owns two threads (poll, training); the destructor stops both within ~2 s
// (the training thread at its next step, with a snapshot).
#pragma once

#include "libs/collective/ring.hpp"

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace loom::runtime {
struct service_env;
}

namespace loom::trainer {

class worker {
 public:
  explicit worker(runtime::service_env& env);
  ~worker();
  worker(const worker&) = delete;
  worker& operator=(const worker&) = delete;

 private:
  struct stage_run {
    std::string job, stage, config_toml, out_dir, init_from;
    std::uint32_t attempt = 0;
    std::uint32_t rank = 0, world = 1;
    std::uint64_t generation = 0;
    std::vector<collective::member> peers;  // by rank
    std::string state = "running";  // running, succeeded, failed, stopped, regroup
    std::uint64_t step = 0, total_steps = 0;
    double loss = 0, first_loss = 0, tokens_per_s = 0;
    std::string checkpoint, message;
  };

  void poll_loop();
  void start(stage_run run);
  void train(std::shared_ptr<stage_run> run);
  void join_training();

  runtime::service_env& env_;
  std::unique_ptr<collective::inbox> inbox_;  // null when it could not bind (groups then fail)
  std::mutex mu_;                       // guards current_
  std::shared_ptr<stage_run> current_;  // null when idle
  std::atomic<bool> stop_training_{false};
  std::atomic<bool> quit_{false};
  std::condition_variable cv_;
  std::thread training_;
  std::thread poller_;
};

}  // namespace loom::trainer
