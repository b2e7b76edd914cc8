// hpo_search: the search of one `hpo` stage in the scheduler (issue 15 item 7).
// libs/hpo's ASHA over the stage's trials; the job manager runs each trial
// as segments — train trial t from its last step to a rung, then score it —
// placed on any free trainer like a one-trainer stage (jobs/hpo_stage.cpp).
// A segment's end brings the trial's validation loss and ASHA decides at once:
//
//   promote   the trial's next segment (to the next rung) is queued now;
//   stop      pruned: nothing more is queued for it, its trainer is free
//             (a later next() may still promote it, once more trials reach its rung);
//   complete  it reached R.
//
// The search ends when ASHA is done (finish_best: the best trial is trained to
// R); best() is its result. take_retired() names the trials that will never
// run again as ASHA learns it, so the job manager removes their directories
// while the search goes on; take_all_but_best() the rest at the end. Pure: no clock, no policy, no store; deterministic
// (the same reports in the same order, the same segments). Owned by the job
// manager (the scheduler actor's thread).
//
// Every segment next() hands out and every report() is kept in order in
// journal(): replaying it (resume) gives back the same search, which is how a
// search survives a scheduler restart (hpo_stage.cpp stores it with the stage).
#pragma once

#include "libs/hpo/asha.hpp"
#include "libs/runspec/hpo_stage.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace loom::scheduler {

struct hpo_segment {
  int trial = -1;
  std::int64_t from = 0, to = 0;  // train from -> to, then score
};

// One step of a search, in the order it happened: a segment next() handed
// out, or a report (a promotion report() decided needs no entry: replaying
// the report decides it again).
struct hpo_entry {
  enum class kind { segment, report } what = kind::segment;
  int trial = -1;
  std::int64_t from = 0, to = 0;  // segment: from -> to; report: to = the step reported
  double loss = 0;                // report: NaN for a failed segment
  bool operator==(const hpo_entry& o) const {  // two NaN losses (failed segments) are the same entry
    return what == o.what && trial == o.trial && from == o.from && to == o.to &&
           (loss == o.loss || (loss != loss && o.loss != o.loss));
  }
};

class hpo_search {
 public:
  // invalid_argument: the stage's [hpo] (checked at submit, so only a stored
  // row edited since) or a trial's config.
  static result<hpo_search> make(const std::string& stage_toml, const runspec::run_config& spec);

  // The search as it stood after `journal` (another search's journal(), for
  // the same stage TOML and spec): each entry is applied again and must give
  // what it recorded. invalid_argument naming the first entry that does not
  // (a journal of another search, or edited).
  static result<hpo_search> resume(const std::string& stage_toml, const runspec::run_config& spec,
                                   const std::vector<hpo_entry>& journal);
  const std::vector<hpo_entry>& journal() const { return journal_; }
  // The segments handed out whose end is not reported yet, by trial.
  std::vector<hpo_segment> in_flight() const;

  // A segment to queue now (a new trial, or a paused one promoted late);
  // nullopt while ASHA waits on running segments, or when it is done.
  std::optional<hpo_segment> next();
  // Segment `trial` ended at `step` with validation loss `loss` (NaN: it
  // failed; the trial stops for good). Returns the trial's next segment when
  // promoted; `decision` says what ASHA decided (promote, stop, complete).
  // invalid_argument: a trial not running, a step beyond its target.
  result<std::optional<hpo_segment>> report(int trial, std::int64_t step, double loss, hpo::action* decision);
  bool done() const { return asha_.done(); }

  std::optional<int> best() const { return asha_.best_trial(); }
  double loss_of(int trial) const { return asha_.loss_of(trial); }
  std::size_t trials() const { return plan_.trials.size(); }
  // Trial t's run config (kind lm, train.steps = R, its values) and overrides.
  const std::string& config_of(int trial) const { return configs_[std::size_t(trial)]; }
  std::vector<std::string> overrides_of(int trial) const { return plan_.trials[std::size_t(trial)].overrides(); }
  std::string describe(int trial) const;  // "trial 3 (optim.lr=0.00233)"
  // Its values as (key, value text) in the space's order: {{"optim.lr", "0.00233"}}.
  std::vector<std::pair<std::string, std::string>> values_of(int trial) const;
  const std::string& eval_text() const { return plan_.spec.validation; }
  std::int64_t steps_granted() const { return asha_.steps_granted(); }
  std::int64_t sweep_steps() const { return std::int64_t(trials()) * plan_.spec.asha.max_steps; }
  std::int64_t max_steps() const { return plan_.spec.asha.max_steps; }
  const std::vector<std::int64_t>& rungs() const { return asha_.rungs(); }
  // What one trainer needs to run trial t (its own batch, seq_len, ...).
  std::uint64_t memory_of(int trial) const { return memory_[std::size_t(trial)]; }
  // Trials ASHA will never run again (hpo::asha::retired: failed, or pruned
  // for good), each returned once: their directories may go. The best trial
  // is never among them while the search runs.
  std::vector<int> take_retired();
  // Once done(): every trial not returned yet but the best (kept: the
  // stage's result), each returned once.
  std::vector<int> take_all_but_best();

 private:
  hpo_search(runspec::hpo_stage_plan plan, hpo::asha a, std::vector<std::string> configs,
             std::vector<std::uint64_t> memory)
      : plan_(std::move(plan)), asha_(std::move(a)), configs_(std::move(configs)), memory_(std::move(memory)),
        removed_(configs_.size(), false) {}
  runspec::hpo_stage_plan plan_;
  hpo::asha asha_;
  std::vector<std::string> configs_;
  std::vector<std::uint64_t> memory_;  // by trial
  std::vector<bool> removed_;          // by trial: returned by take_retired / take_all_but_best
  std::vector<hpo_entry> journal_;
};

}  // namespace loom::scheduler
