// asha: asynchronous successive halving (Li et al., "A System for Massively
// Parallel Hyperparameter Tuning", 2018) over a fixed list of trial configs.
// The resource is training steps. Rungs: K = floor(log_eta(R / r)),
// rung k's resource r_k = round(R / eta^(K-k)) for k = 0..K (r_0 >= r, r_K = R).
//
//   Rule: a trial that reached rung k (k < K) is promoted to rung k+1 when its
//   validation loss is among the best floor(n_k / eta) of the n_k trials that
//   reached rung k so far (ties: the lower trial id), and it was not promoted before.
//
// report() records a trial's loss; at a rung boundary it decides at once:
// promote (the same worker goes on to the next rung, from the trial's own
// state), stop (the worker is free; the trial may still be promoted later by
// suggest(), when more trials have reached its rung) or complete (it reached R).
// A non-finite loss stops the trial for good. suggest() gives a free worker
// work: the best promotable trial, top rung first; else a new trial; else wait
// while others run. Our addition for a finite list (finish_best): when nothing
// runs, no rule promotes and no trial reached R, the best trial of the highest
// rung reached is promoted, so the search ends with a config trained to R.
// Pure and deterministic: the same reports in the same order, the same answers.
// One thread drives it.
#pragma once

#include "libs/hpo/search_space.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <vector>

namespace loom::hpo {

struct asha_options {
  std::int64_t min_steps = 0;  // r: the least resource of the first rung
  std::int64_t max_steps = 0;  // R: a trial's full budget (its schedule's length)
  int eta = 3;                 // reduction factor: 1/eta of each rung goes on
  bool finish_best = true;
  status validate() const;  // invalid_argument: r < 1, R < r, eta < 2
};

enum class action {
  continue_training,  // mid-rung report: go on to the rung's boundary
  promote,            // go on to the next rung (the trial's target moved)
  stop,               // free the worker (paused: a later suggest() may resume it)
  complete,           // reached R
};

struct suggestion {
  enum class kind { start, resume, wait, done } what = kind::done;
  int trial = -1;
  std::int64_t from_step = 0, to_step = 0;  // train from_step -> to_step, then report
};

class asha {
 public:
  // invalid_argument for bad options or an empty list of trials.
  static result<asha> make(const asha_options& opt, std::vector<trial_config> trials);

  const std::vector<std::int64_t>& rungs() const { return rungs_; }
  const std::vector<trial_config>& trials() const { return trials_; }

  suggestion suggest();
  // invalid_argument: an unknown trial, one not running, a step beyond its
  // target or behind its last report. Non-finite loss: the trial stops for good.
  status report(int trial, std::int64_t step, double val_loss);
  // The decision of the trial's last report (continue_training before any).
  action next_action(int trial) const;

  // The best trial so far: lowest loss at the highest rung any trial reached.
  std::optional<int> best_trial() const;
  double loss_of(int trial) const;         // at its highest rung reached (+inf: none)
  int rung_of(int trial) const;            // highest rung reached, -1: none
  std::int64_t steps_granted() const { return granted_; }  // resource handed out, total
  // Whether trial t will never be granted steps again (what it trained may
  // go): it failed, or it is paused at a rung k < K where no later report can
  // promote it — the trials already ahead of it there fill the largest quota
  // floor((n_k + may_arrive) / eta) that rung can ever reach, counting every
  // trial below rung k that has not failed as one that may still arrive —
  // and finish_best can no longer pick it (a trial reached R with a finite
  // loss). Never true for a trial at R (any of them may become the best) nor
  // for best_trial(): a retired trial never becomes the best later, as its
  // rank at its rung can only fall. Once true it stays true.
  bool retired(int trial) const;
  int running() const;
  // Trial t holds a grant it has not reported the end of: it trains from
  // step_of(t) (its last report) to target_of(t).
  bool is_running(int trial) const { return state_[std::size_t(trial)].running; }
  std::int64_t step_of(int trial) const { return state_[std::size_t(trial)].step; }
  std::int64_t target_of(int trial) const { return state_[std::size_t(trial)].target; }
  bool done() const;  // suggest() would say done

 private:
  struct trial_state {
    bool started = false, running = false, failed = false;
    std::int64_t step = 0, target = 0;
    int rung = -1;  // highest rung reached
    std::vector<bool> promoted_from;  // per rung
    action last = action::continue_training;
  };
  struct record {
    int trial;
    double loss;
  };
  bool promotable(int trial, int rung) const;
  void grant(int trial, int to_rung);
  std::optional<int> best_at(int rung, bool only_promotable) const;

  asha_options opt_;
  std::vector<std::int64_t> rungs_;
  std::vector<trial_config> trials_;
  std::vector<trial_state> state_;
  std::vector<std::vector<record>> reached_;  // per rung, in arrival order
  int next_new_ = 0;
  std::int64_t granted_ = 0;
};

}  // namespace loom::hpo
