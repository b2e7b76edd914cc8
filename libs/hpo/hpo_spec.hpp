// hpo_spec: an `hpo` job's search, read from the [hpo] and [hpo.space]
// tables of its TOML (the stage's own sections are the run spec's and are
// ignored here):
//
//   [hpo]
//   method = "random"        # or "grid"
//   trials = 8               # random only: the grid's size is its own
//   seed = 1                 # random only
//   grid_points = 3          # grid only: values per real range
//   min_steps = 30           # ASHA's r
//   max_steps = 300          # ASHA's R (0 or absent: the stage's train.steps)
//   eta = 3
//   validation = "/abs/held-out.txt"   # the trials' held-out text (default: the data's tail)
//   [hpo.space]
//   "optim.lr" = {log_uniform = [1e-4, 1e-2]}
//   "optim.warmup_steps" = {choice = [0, 10, 50]}
//   "train.batch" = {int = [4, 16]}
//   "optim.weight_decay" = {uniform = [0.0, 0.2]}
//
// Strict: an unknown key, a wrong type or a bad range is invalid_argument
// naming the key and origin:line. Pure: parses the text it is given.
#pragma once

#include "libs/hpo/asha.hpp"
#include "libs/hpo/search_space.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::hpo {

struct hpo_spec {
  search_space space;
  std::string method = "random";  // random | grid
  int trials = 8;
  std::uint64_t seed = 1;
  int grid_points = 3;
  asha_options asha;  // max_steps 0: the caller sets it from the stage's train.steps
  // A held-out text file every trial is scored on (absolute); "" = the tail
  // of the stage's own data source (text it trains on: a weaker measure).
  std::string validation;

  // The trials, in order: space.sample(trials, seed) or space.grid(grid_points).
  result<std::vector<trial_config>> trial_configs() const;
};

result<hpo_spec> parse_hpo(std::string_view toml, const std::string& origin);

// The keys of [hpo] (libs/runspec's schema types each of them).
const std::vector<std::string_view>& hpo_keys();

}  // namespace loom::hpo
