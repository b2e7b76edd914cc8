// trial_score: an hpo trial's validation loss, measured by the trainer at the
// trial's rung (worker.cpp) — the mean next-token loss of the run's current
// parameters over fixed windows spread evenly over a held-out text, tokenized
// as the run's data (data.tokenizer; "bytes": one token per byte). Every
// trial and rung of a search is scored on the same windows, so the scheduler
// can compare their losses. Built once per run; one thread uses it (the
// training thread, between steps).
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::trainer {

class trial_scorer {
 public:
  // Windows scored: eval_batches batches of eval_batch windows of train.seq_len
  // (4096 tokens at seq_len 32): the spread of the local search (local_search.hpp),
  // enough that the rank of two trials 1% apart does not hang on a few windows.
  static constexpr int eval_batches = 16;
  static constexpr int eval_batch = 8;

  // eval_text: a held-out text file; "" = the last 5% of data.text (text the
  // run trains on: a weaker measure). Read at most its key's cap
  // (runspec::read_input: a device, a FIFO or a file over the cap is
  // refused). invalid_argument / not_found naming the file; a text shorter
  // than one window is invalid_argument.
  static result<trial_scorer> make(const runspec::run_config& c, const std::string& eval_text);
  trial_scorer(trial_scorer&&) noexcept;
  trial_scorer& operator=(trial_scorer&&) noexcept;
  ~trial_scorer();

  // REQUIRES: params.size() is the model's parameter count.
  result<double> score(std::span<const float> params);
  std::size_t tokens() const { return ids_.size(); }

 private:
  struct model;
  trial_scorer() = default;
  std::vector<std::int32_t> ids_;
  int seq_len_ = 0;
  std::unique_ptr<model> m_;
};

}  // namespace loom::trainer
