// job_template: a job template (TOML, under templates/) plus the submitter's
// overrides, resolved into one run config per stage — the text a trainer runs
// with `loom-trainer train`'s format. Pure: no files, no clock.
//
//   [job]                     name, priority ("low" | "normal" | "high"),
//                             stages = ["pretrain", "sft"]   (default ["pretrain"])
//   [model] [data] [train] [optim] [checkpoint] [anomaly]    shared by every stage
//   [stage.sft]               "train.steps" = 100, "data.format" = "sft", ...  (one stage)
//
// Overrides, applied last: "section.key=value" (every stage),
// "stage.section.key=value" (one stage), or a shortcut (every stage):
//   dataset text sft shards steps lr seed batch seq_len threads
// A stage after the first starts from its predecessor's final checkpoint
// (the scheduler fills model.init_from when it places the stage).
// Values are validated in full by the trainer (run_config); here: TOML syntax,
// sections, stage names and the override forms.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace loom::scheduler {

struct stage_plan {
  std::string name;
  std::string config_toml;  // the resolved run config
  std::uint64_t total_steps = 0;
};

struct job_plan {
  std::string name;
  std::string priority_class;  // low, normal, high
  std::vector<stage_plan> stages;
};

// invalid_argument naming the template, the key or the override.
result<job_plan> resolve_template(std::string_view template_name, std::string_view toml,
                                  const std::vector<std::string>& overrides);

int priority_of(std::string_view cls);  // low 0, normal 1, high 2; -1 unknown

}  // namespace loom::scheduler
