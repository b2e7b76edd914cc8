// job_template: a job template (TOML, under templates/) plus the submitter's
// overrides, resolved into one validated run config per stage. The scheduler
// calls it at submit, so a bad template or override is refused before anything
// is stored, naming the template's file:line or the override's key; the
// resolved text is what the stage's trainer runs. Pure: no files, no clock.
//
//   [job]                     name, priority ("low" | "normal" | "high"),
//                             stages = ["pretrain", "sft"]   (default ["pretrain"])
//   [model] [data] [train] [optim] [checkpoint] [anomaly] [parallel] [diloco]   shared by every stage
//   kind = "lm"               the stages' kind (run_config.hpp), also per stage
//   [stage.sft]               "train.steps" = 100, kind = "sft", ...  (one stage)
//
// Overrides, applied last: "section.key=value" (every stage),
// "stage.section.key=value" (one stage), "kind=K" / "stage.kind=K", or a
// shortcut (every stage, or one with a stage prefix):
//   dataset text sft shards steps lr seed batch seq_len threads trainers
// Paths must be absolute (the trainer runs elsewhere; the CLI makes --set paths
// absolute). A stage after the first starts from its predecessor's final
// checkpoint (the scheduler fills model.init_from when it places the stage).
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runspec {

struct stage_plan {
  std::string name;
  std::string config_toml;  // the resolved run config, as the trainer reads it
  run_config spec;          // the same, parsed and validated
};

struct job_plan {
  std::string name;
  std::string priority_class;  // low, normal, high
  std::vector<stage_plan> stages;
};

// invalid_argument naming the template (file:line where a template line is at
// fault), the stage, and the key or the override.
result<job_plan> resolve_template(std::string_view template_name, std::string_view toml,
                                  const std::vector<std::string>& overrides);

// low 0, normal 1, high 2; -1 unknown.
int priority_of(std::string_view cls);

}  // namespace loom::runspec
