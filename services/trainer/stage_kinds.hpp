// stage_kinds: what each kind of stage adds to the common run, set up by the
// worker's run_stage (stage_kinds.cpp) — an hpo trial (scored at its rung,
// then it ends), a diloco stage's site (its sync with the aggregator), a
// data-parallel group (the ring's all-reduce) — and the state their hooks use
// while run_training runs. Lives on the training thread's stack for one stage.
#pragma once

#include "libs/collective/ring.hpp"
#include "services/trainer/diloco/site_sync.hpp"
#include "services/trainer/hpo/trial_score.hpp"

#include <atomic>
#include <memory>
#include <optional>

namespace loom::trainer {

struct stage_extras {
  // A group: this trainer is member `rank`; an exchange that fails ends the run with `regroup`.
  std::unique_ptr<collective::group> group;
  std::atomic<bool> exchange_failed{false};
  // A diloco stage: this trainer is one site of the stage's aggregation.
  std::unique_ptr<site_sync> site;
  // An hpo trial: its held-out scorer (none when the stage runs in a process
  // of its own, which builds its own), and whether the run reached its rung.
  bool trial = false;
  std::optional<trial_scorer> scorer;
  bool rung_reached = false;
};

}  // namespace loom::trainer
