// hpo_stage: a job stage of kind "hpo" — a hyper-parameter search the
// scheduler runs (services/scheduler/jobs/hpo_trials.*): its [hpo] and
// [hpo.space] tables (libs/hpo/hpo_spec.hpp) and the run config of each trial.
// A trial is an ordinary lm run: the stage's own settings with kind = "lm",
// train.steps = ASHA's R (its schedule's length) and the trial's values.
// Pure: parses the text it is given; no files, no clock.
#pragma once

#include "libs/hpo/hpo_spec.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::runspec {

struct hpo_stage_plan {
  hpo::hpo_spec spec;  // asha.max_steps set (train.steps when [hpo] leaves it 0)
  std::vector<hpo::trial_config> trials;
};

// The search of an hpo stage. `toml` holds its [hpo] table: the template's
// text at submit (errors name origin:line) or the stage's resolved config.
// invalid_argument: a bad [hpo] (hpo_spec.hpp), ASHA options that do not fit
// (R < r), a grid too large.
result<hpo_stage_plan> read_hpo_stage(std::string_view toml, const std::string& origin, const run_config& stage);

// Trial `trial`'s run config text: the stage's config with kind = "lm",
// train.steps = R, the trial's values and no [hpo] table. invalid_argument
// naming the trial when its values make a config parse_run_config refuses.
// `parsed`, when given, receives the trial's config as parsed (its memory()).
// REQUIRES: 0 <= trial < plan.trials.size().
result<std::string> trial_config_toml(std::string_view stage_toml, const hpo_stage_plan& plan, std::size_t trial,
                                      run_config* parsed = nullptr);

// `config_toml` with "section.key=value" overrides applied (the stage after an
// hpo stage runs with the best trial's values). invalid_argument for bad text.
result<std::string> with_overrides(std::string_view config_toml, const std::vector<std::string>& overrides);

}  // namespace loom::runspec
