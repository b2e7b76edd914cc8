// work_state: what a trainer is doing, as one state machine — the truth that
// PollWork reports to the scheduler and TrainerStatus to a client. Pure: no
// threads, no clock; the worker changes it, a work_board shares it.
//
//   idle ──assign──▶ preparing ──started──▶ running ──finish(succeeded|failed)──▶ done
//                      │   │                  │ │
//                      │   │ stop             │ └─stop──▶ stopping ──finish(stopped | succeeded)──▶ done
//                      │   └──────────────────┼──────────▲
//                      │ finish(failed)       │ exchange failed
//                      ▼                      ▼
//                     done               regrouping ──finish(regroup)──▶ done
//   done ──reported──▶ idle            (every state but idle: the stage it holds)
//
// preparing: fetching the dataset, tokenizing, building or resuming the model.
// done: the outcome waits for the scheduler to hear it (the next poll).
#pragma once

#include "libs/diloco/progress/site_progress.hpp"

#include "libs/status/status.hpp"

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace loom::trainer {

enum class work_phase { idle, preparing, running, stopping, regrouping, done };
std::string_view to_string(work_phase p);

// The stage a trainer holds and where it is in it.
struct work_view {
  work_phase phase = work_phase::idle;
  std::string outcome;  // done: succeeded, failed, stopped, regroup
  bool started = false; // the step loop began (running was reached)
  std::string job, stage;
  std::string tenant;   // the job's (Assignment.tenant): who besides admins may see the job here
  std::uint32_t attempt = 0, rank = 0, world = 1;
  std::uint64_t generation = 0;
  std::uint64_t step = 0, total_steps = 0;
  double loss = 0, first_loss = 0, tokens_per_s = 0;
  std::string checkpoint, message;
  double val_loss = 0;          // an hpo trial's held-out loss at val_step (0: not scored)
  std::uint64_t val_step = 0;
  diloco::site_progress site;  // a diloco stage's site (site_sync::progress), reported with each poll
  // A diloco stage's member 0, at its end: the sites the aggregator accepted
  // a delta from, and those it never had one from (diloco.min_sites).
  std::vector<std::string> contributed, missing;
  std::string precision;  // what the stage's matmuls run in (fp32, bf16); "" until its model is built
  // The host's, not the stage's (shown to every caller): how stages run here,
  // and the load-shedding gauge (ok, high, sustained) with the memory in use.
  std::string isolation = "the service's training thread", pressure = "ok";
  double memory_used = -1;
};

class work_state {
 public:
  struct stage_ref {
    std::string job, stage;
    std::uint32_t attempt = 0, rank = 0, world = 1;
    std::uint64_t generation = 0, total_steps = 0;
    std::string tenant{};  // the job's
  };
  // Each transition is conflict (naming both states) when it is not allowed
  // from the current one, and then changes nothing.
  status assign(const stage_ref& s);  // idle -> preparing
  status started();                   // preparing -> running
  status stop();                      // preparing | running -> stopping (idempotent in stopping)
  status exchange_failed(const std::string& why);  // preparing | running | stopping -> regrouping
  // preparing | running | stopping | regrouping -> done. `outcome` is
  // succeeded (running, or stopping when the last step came before the stop),
  // failed, stopped (after stop) or regroup (after exchange_failed);
  // `message` says why for failed and regroup.
  status finish(const std::string& outcome, const std::string& message = "");
  status reported();                  // done -> idle

  // The stage's length, once its config is read (any state but idle).
  void set_total_steps(std::uint64_t n);
  // Progress of the step loop (running or stopping); ignored otherwise.
  void progress(std::uint64_t step, double loss, double tokens_per_s);
  // The stage's matmul precision, once its model is built (any state but idle).
  void set_precision(const std::string& p);
  void snapshot(const std::string& dir);
  void scored(std::uint64_t step, double val_loss);  // an hpo trial's held-out loss (any state but idle)
  // A diloco site's sync figures (any state but idle; the last stay with the outcome).
  void site(const diloco::site_progress& r);
  // The host's facts (any state): set by the worker at start and every poll.
  void host(const std::string& isolation, const std::string& pressure, double memory_used);
  // A diloco stage's end (member 0): who contributed (any state but idle).
  void contributions(std::vector<std::string> contributed, std::vector<std::string> missing);

  const work_view& view() const { return v_; }
  // What PollWork says: idle; running while preparing, running or stopping;
  // the outcome once done.
  std::string report() const;

 private:
  status move(std::initializer_list<work_phase> from, work_phase to, const char* what);
  void clear_stage();  // every field of the stage gone, the host's kept
  work_view v_;
};

// What TrainerStatus shows a caller (issue 24: which tenant's job runs where
// is that tenant's business). The whole view to an admin and to the tenant of
// the job it holds (and when it holds none); to anyone else the phase alone:
// no job, stage, out dir, progress or message. `withheld` says which.
struct shown_view {
  work_view view;
  bool withheld = false;
};
shown_view shown_to(const work_view& v, bool admin, std::string_view tenant);

// A work_state shared by the worker's threads (which change it) and the
// service logic (which reports it): every access under one mutex.
class work_board {
 public:
  template <class F>
  auto with(F&& f) {
    std::lock_guard lock(mu_);
    return f(state_);
  }
  work_view view() const {
    std::lock_guard lock(mu_);
    return state_.view();
  }

 private:
  mutable std::mutex mu_;
  work_state state_;
};

}  // namespace loom::trainer
