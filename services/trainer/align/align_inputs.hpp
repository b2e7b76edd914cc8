// align_inputs: what an alignment stage (kind rm, dpo or rl) trains on, from
// its run config — the preference pairs (data.prefs or the synthetic set),
// split into train and held-out, rendered and tokenized (GPT-2, data.tokenizer,
// or "bytes"); the prompts an rl stage samples from; and an rl stage's rule
// reward (reward.keywords / min_len / max_len / regex). Built once by
// align_run.cpp before the first step; plain values, one thread.
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"
#include "services/trainer/align/grpo.hpp"
#include "services/trainer/align/preference_data.hpp"

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace loom::trainer {

struct align_inputs {
  std::vector<align::pair_tokens> train;     // every training pair, in file order
  std::vector<align::pair_batch> held_out;   // held-out pairs in batches of train.batch (a tail dropped)
  std::vector<std::vector<std::int32_t>> train_prompts, eval_prompts;  // rl: prompt tokens (rendered)
  std::int32_t stop_token = 0;               // the end of a rendered response: where sampling stops
  std::string identity;                      // SHA-256 of what the pairs are (the file, or "synthetic" and its seed)
  // Token ids -> text (rule rewards read text).
  std::function<std::string(std::span<const std::int32_t>)> decode;
};

// invalid_argument naming the key when the data gives fewer held-out pairs
// than one batch, or fewer training pairs than one batch; errors of the
// preference file name it and the line.
result<align_inputs> load_align_inputs(const runspec::run_config& c);

// The rule of reward.keywords / min_len / max_len / regex as a reward: each
// completion's text (its trailing stop token dropped) scores the mean of the
// parts set — the share of keywords present, 1 inside the length bounds
// (bytes) else 0, 1 on a full regex match else 0.
align::reward_fn rule_reward(const runspec::align_settings& a, const align_inputs& in);

}  // namespace loom::trainer
