// job_template: a job template (TOML, under templates/) plus the submitter's
// overrides, resolved into one run config per stage — the text a trainer runs
// with `loom-trainer train`'s format. Pure: no files, no clock.
//
//   [job]                     name, priority ("low" | "normal" | "high"),
//                             stages = ["pretrain", "sft"]   (default ["pretrain"])
//   [model] [data] [train] [optim] [checkpoint] [anomaly]    shared by every stage
//   [parallel]                trainers = N (a gang of N trainers, data-parallel), or
//                             min_trainers / max_trainers (elastic: any size in the range);
//                             at most train.grad_accum (each trainer takes whole micro-batches)
//   [stage.sft]               "train.steps" = 100, "data.format" = "sft", ...  (one stage)
//
// Overrides, applied last: "section.key=value" (every stage),
// "stage.section.key=value" (one stage), or a shortcut (every stage):
//   dataset text sft shards steps lr seed batch seq_len threads trainers
// A stage after the first starts from its predecessor's final checkpoint
// (the scheduler fills model.init_from when it places the stage).
// Values are validated in full by the trainer (run_config); here: TOML syntax,
// sections, stage names and the override forms.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::scheduler {

struct stage_plan {
  std::string name;
  std::string config_toml;  // the resolved run config
  std::uint64_t total_steps = 0;
  std::uint32_t min_trainers = 1, max_trainers = 1;  // [parallel]: the group's size range
};

struct job_plan {
  std::string name;
  std::string priority_class;  // low, normal, high
  std::vector<stage_plan> stages;
};

// invalid_argument naming the template, the key or the override.
result<job_plan> resolve_template(std::string_view template_name, std::string_view toml,
                                  const std::vector<std::string>& overrides);

int priority_of(std::string_view cls);

// The [parallel] size range of a resolved stage config (what resolve_template
// wrote): {min, max} trainers.
result<std::pair<std::uint32_t, std::uint32_t>> trainers_of(std::string_view config_toml);  // low 0, normal 1, high 2; -1 unknown

}  // namespace loom::scheduler
