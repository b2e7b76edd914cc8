// align_run: run_training for the alignment kinds (rm, dpo, rl) — the
// stage-specific models and step around the same snapshots, metrics log and
// resume rules as an lm or sft run (training_run.hpp says what they are).
//   rm   backbone (init_from or random) + reward head; Bradley–Terry on pairs.
//        The head and its AdamW moments are reward_head.safetensors in each snapshot.
//   dpo  policy from init_from + a frozen reference (align.reference, default
//        the same checkpoint); DPO or IPO on pairs.
//   rl   GRPO: policy from init_from + frozen reference; the reward is an rm
//        checkpoint (reward.model) or a rule. Step s samples with seed
//        train.seed·7919 + s, so a resumed run draws what an uninterrupted one does.
// Pairs come from a pair_stream whose cursor is the snapshot's data cursor.
// Held-out metrics at the start (step 0), every align.eval_every steps and
// at the end: out_dir/eval.json {"before":{...},"after":{...}}, and in
// run_summary::eval. One trainer (no data-parallel group). Blocking.
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/run/training_run.hpp"

namespace loom::trainer {

// REQUIRES: c.alignment(). Errors as run_training's; invalid_argument also
// for a reward.model that is not a reward-model checkpoint (names it).
result<run_summary> run_alignment(const runspec::run_config& c, const run_options& o);

}  // namespace loom::trainer
