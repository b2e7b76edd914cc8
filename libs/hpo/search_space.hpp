// search_space: the hyper-parameters an `hpo` job searches over — each a run
// spec key (libs/runspec: "optim.lr", "train.batch", ...) with a distribution —
// and the trials drawn from it, random (a seed) or on a grid. A trial's config
// is a list of `--set key=value` overrides, so a trial is an ordinary stage.
// Pure: no clock, no threads, no I/O; same seed, same trials on any machine
// (the generator is splitmix64, not the standard library's distributions).
// Plain values; no shared state.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::hpo {

enum class distribution {
  log_uniform,  // real in [lo, hi], uniform in log space (lo > 0)
  uniform,      // real in [lo, hi]
  int_range,    // integer in [lo, hi], each equally likely
  choice,       // one of `values`, each equally likely
};

struct parameter {
  std::string key;  // a run spec key, "section.key"
  distribution dist = distribution::uniform;
  double lo = 0, hi = 0;       // the range (not for choice)
  std::vector<double> values;  // choice's values
  bool integer = false;        // the key takes integers (train.batch, optim.warmup_steps, ...)
};

// One key's value in one trial.
struct assignment {
  std::string key;
  double value = 0;  // integral when integer; reals kept to 6 significant digits
  bool integer = false;
  std::string text() const;  // "0.00123", "16": what --set gets
};

struct trial_config {
  std::vector<assignment> values;  // in the space's key order

  // {"optim.lr=0.00123", "optim.warmup_steps=10"}: runspec::parse_run_config's overrides.
  std::vector<std::string> overrides() const;
  std::string text() const;  // the overrides joined by spaces (logs, bench lines)
  std::optional<double> number(const std::string& key) const;
};

// The keys a search may set and whether each takes integers. train.steps is
// not one of them: the resource a trial is given is the search's to decide.
struct tunable_key {
  const char* key;
  bool integer;
};
const std::vector<tunable_key>& tunable_keys();

// The most trials one search may have (hpo.trials, or a grid's points). Each
// trial is resolved and checked at submit, waits in the scheduler with its
// own run config, and keeps a directory of snapshots until ASHA prunes it;
// 1000 first-rung runs already keep a deployment of a few dozen trainers busy
// for days, and ASHA at eta = 3 needs 3^6 = 729 trials for six rungs. A larger
// count is a typo (10000), not a search this platform runs.
inline constexpr std::size_t max_trials = 1000;

class search_space {
 public:
  // invalid_argument naming the key: an unknown or repeated key, an empty or
  // inverted range, lo <= 0 for log_uniform, a real range or value for an integer key.
  static result<search_space> make(std::vector<parameter> params);

  const std::vector<parameter>& parameters() const { return params_; }

  // n trials drawn independently from each parameter's distribution. REQUIRES: n >= 1.
  std::vector<trial_config> sample(int n, std::uint64_t seed) const;
  // Every combination (first key slowest): choice and int_range values in
  // full (an int_range wider than `points` gets `points` evenly spaced
  // integers), real ranges `points` values from lo to hi (log-spaced for
  // log_uniform). invalid_argument when points < 2 or the grid exceeds `limit` trials.
  result<std::vector<trial_config>> grid(int points, std::size_t limit = max_trials) const;

 private:
  std::vector<parameter> params_;
};

}  // namespace loom::hpo
