// job_template: a job template (TOML, under templates/) plus the submitter's
// overrides, resolved into one validated run config per stage. The scheduler
// calls it at submit, so a bad template or override is refused before anything
// is stored, naming the template's file:line or the override's key; the
// resolved text is what the stage's trainer runs. Pure: no files, no clock.
//
//   [job]                     name, priority ("low" | "normal" | "high"),
//                             stages = ["pretrain", "sft"]   (default ["pretrain"])
//   [model] [data] [train] [optim] [checkpoint] [anomaly] [parallel] [diloco] [hpo]   shared by every stage
//                             ([hpo], [hpo.space]: a kind = "hpo" stage's search, hpo_stage.hpp;
//                             checked at submit with the template's lines)
//   kind = "lm"               the stages' kind (run_config.hpp), also per stage
//   [stage.sft]               "train.steps" = 100, kind = "sft", ...  (one stage)
//   [ingest]                  import options for the job's data (template_info.hpp):
//                             validated here, used by `loom data import --template`
//
// Overrides, applied last: "section.key=value" (every stage),
// "stage.section.key=value" (one stage), "kind=K" / "stage.kind=K", or a
// shortcut (every stage, or one with a stage prefix):
//   dataset text sft shards steps lr seed batch seq_len threads trainers
// Paths must be absolute (the trainer runs elsewhere; the CLI makes --set paths
// absolute). A stage after the first starts from its predecessor's final
// checkpoint (the scheduler fills model.init_from when it places the stage).
// reward.model, align.reference and model.init_from may name another
// earlier stage's final checkpoint as "${stage.NAME.checkpoint}"
// (reward.model: an rm stage; init_from: e.g. an rl stage starting from sft,
// not from the rm stage before it); the scheduler fills it at placement
// (fill_stage_references) and then leaves that stage's init_from as given.
#pragma once

#include "libs/runspec/run_config.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runspec {

struct stage_plan {
  std::string name;
  std::string config_toml;  // the resolved run config, as the trainer reads it
  run_config spec;          // the same, parsed and validated
  // The config whose memory the stage's largest run needs (admission checks
  // it against the trainers): spec itself, or for an hpo stage the trial that
  // needs the most, and for the stage after one — which runs with the best
  // trial's values — those values that need the most. sizing_what names that
  // point ("trial 3 (train.batch=64 optim.lr=0.001)"), "" when it is spec.
  run_config sizing;
  std::string sizing_what;
  // The stage's steps as `loom job show` counts them: train.steps; an hpo
  // stage's full sweep, trials x R (its step counts the steps ASHA granted).
  std::uint64_t total_steps = 0;
};

struct job_plan {
  std::string name;
  std::string priority_class;  // low, normal, high
  std::vector<stage_plan> stages;
};

// The largest template text a job is submitted with. The shipped templates
// are under 2 KiB; the scheduler parses a submitted text on its one logic
// thread and keeps 64 parsed texts (template_cache): 1 MiB leaves any
// hand-written template room and bounds both the parse and the cache. The
// scheduler refuses a longer text before parsing it; `loom job submit` reads
// no more of a template file.
inline constexpr std::size_t max_template_bytes = std::size_t{1} << 20;

// invalid_argument naming the template (file:line where a template line is at
// fault), the stage, and the key or the override. Also refused: a stage name
// stage_name_problem refuses, a relative path, an override value that is not
// one TOML value.
result<job_plan> resolve_template(std::string_view template_name, std::string_view toml,
                                  const std::vector<std::string>& overrides);

// resolve_template with the parsed TOML of each template text kept, so a
// template submitted again (the usual case: `loom job submit --template T`
// sends the same text each time) is not parsed again; overrides are applied
// to a fresh copy each call, so results equal resolve_template's. At most
// `capacity` texts are kept (all dropped when full). One thread at a time.
class template_cache {
 public:
  explicit template_cache(std::size_t capacity = 64);
  ~template_cache();
  template_cache(template_cache&&) noexcept;
  template_cache& operator=(template_cache&&) noexcept;

  result<job_plan> resolve(std::string_view template_name, std::string_view toml,
                           const std::vector<std::string>& overrides);
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  struct entry;
  std::size_t capacity_;
  std::map<std::string, std::shared_ptr<entry>, std::less<>> parsed_;  // name '\0' text -> parsed
  std::uint64_t hits_ = 0, misses_ = 0;
};

// config_toml with every "${stage.NAME.checkpoint}" replaced by
// <job_out_dir>/NAME/checkpoints (the scheduler, placing a stage).
std::string fill_stage_references(std::string_view config_toml, const std::string& job_out_dir);

// A stage name is 1 to max_stage_name letters, digits, '-' and '_', starting
// with a letter or a digit, and not a run section's name: it becomes a
// directory (<data>/jobs/<job>/<stage>, <stage>/trial-N), the trainer's stage
// name (<stage>.t<trial>), a metric and event label, a `--set stage.key`
// prefix (a stage named "train" would make `--set train.steps` mean that
// stage alone) and the NAME of "${stage.NAME.checkpoint}". 32 characters fit
// `loom job show`'s columns and stay far below a file name's 255 bytes.
inline constexpr std::size_t max_stage_name = 32;
// "" when `name` is a valid stage name, else why not (for messages).
std::string stage_name_problem(std::string_view name);

// Whether an override's key names a path key of the schema (schema.hpp):
// "data.text", "sft.hpo.validation" (a stage's), a shortcut ("text") or a
// stage's shortcut ("sft.text"). The CLI makes such values absolute before
// it sends them (the trainer reads them on its own machine).
bool override_names_path(std::string_view key);

// low 0, normal 1, high 2; -1 unknown.
int priority_of(std::string_view cls);

}  // namespace loom::runspec
