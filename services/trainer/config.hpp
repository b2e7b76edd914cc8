// config: the command lines of `loom-trainer train`, `sample` and `logits`,
// parsed strictly into typed options — an unknown option, a missing or empty
// value, a malformed or out-of-range number is invalid_argument naming the
// option (exit 2), never a silent default. (`loom-trainer serve` takes the
// runtime's service options: libs/runtime/service_main.cpp.) Plain values.
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/run/sampler.hpp"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace loom::trainer {

struct train_args {
  std::string config;             // --config FILE (required)
  std::string out;                // --out DIR: overrides output.dir
  std::string data_dir;           // --data-dir D: where keys/checkpoint.key lives
  std::vector<std::string> sets;  // every --set section.key=value, in order
  bool resume = false, quiet = false, json = false, help = false;
};

struct sample_args {
  std::string checkpoint, prompt;  // required
  std::string tokenizer, data_dir;
  sample_options sampling;         // --max-tokens 1..1048576, --temperature 0..100, --top-k >= 0, --seed
  int threads = 0;                 // --threads 1..1024; 0 = every core
  bool json = false, help = false;
};

struct logits_args {
  std::string checkpoint, out;       // required
  std::vector<std::string> prompts;  // every --prompt, in order (at least one)
  int tokens = 0;                    // --tokens 1..1048576; 0 = the shortest prompt's (capped at max_seq_len)
  std::string tokenizer, data_dir;
  int threads = 0;                   // --threads 1..1024; 0 = every core
  bool force = false;                // --force: replace an existing --out file
  bool help = false;
};

// argv: the words after the subcommand's name.
result<train_args> parse_train_args(const std::vector<std::string>& argv);
result<sample_args> parse_sample_args(const std::vector<std::string>& argv);
result<logits_args> parse_logits_args(const std::vector<std::string>& argv);

extern const char* const train_usage;
extern const char* const sample_usage;
extern const char* const logits_usage;

// `loom-trainer serve`'s environment: every LOOM_LINK_SHAPE[_<SITE>] must be a
// link spec (libs/wire/link_spec; services/trainer/README.md, "Weak links"),
// and LOOM_SHED_* load shedding's thresholds (libs/runtime/pressure.hpp).
// False after printing the first bad one, naming the variable and the field.
bool serve_env_ok(char** env);

// How `serve` runs stages (services/trainer/README.md, "Stage processes"):
// LOOM_STAGE_PROCESSES 0|1 (1, the default: each plain stage in its own
// process; 0: on the service's training thread), LOOM_STAGE_MEMORY_MB 64..16777216 (the limit of
// each stage's process; unset: twice its memory estimate + 1 GiB) and, for
// tests, LOOM_INJECT_LEAK=JOB:MIB (that job's process keeps MIB 1..4096 more
// per step). invalid_argument naming the variable for anything else.
struct stage_isolation {
  bool processes = true;
  std::uint64_t memory_mb = 0;
  std::string leak_job;
  std::uint64_t leak_mib = 0;
};
result<stage_isolation> stage_isolation_from_env(const std::function<const char*(const char*)>& getenv);

}  // namespace loom::trainer
