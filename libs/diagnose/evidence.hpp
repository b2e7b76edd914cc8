// What `loom diagnose` knows about one job: plain values gathered by the
// client (the job and its events from the scheduler, the node roster, each
// stage's metrics log and config when this host can read them, the disk the
// job writes to, the job's audit trail). The rules (rules.hpp) read only
// this, so each is tested on evidence built by hand. No I/O, no clock.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace loom::diagnose {

// One line of a stage's metrics.jsonl.
struct step_point {
  std::uint64_t step = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, ms_per_step = 0;
};

// One site of a cross-site (diloco) stage as its trainer last reported it.
struct site_fact {
  std::string site, node;
  std::uint64_t step = 0, round = 0;
  double loss = 0, stall_s = 0;
  std::uint64_t deltas_sent = 0, deltas_deferred = 0, deltas_late = 0, deltas_dropped = 0;
  std::vector<std::pair<std::uint64_t, double>> curve;  // (step, loss) as the scheduler saw them, thinned
};

// The stage's run config as its config.toml says (when readable; `known` false otherwise).
struct stage_config {
  bool known = false;
  std::string kind;       // lm, sft, rm, dpo, rl, diloco, hpo
  std::string precision;  // fp32, bf16, auto
  int threads = 0, batch = 0, grad_accum = 0, seq_len = 0, steps = 0, warmup_steps = 0;
  double lr = 0;
  int keep = 0;  // checkpoint.keep
  std::string text;                // config.toml as the trainer was given it
  std::string dataset, data_text;  // data.dataset, data.text
  int inner_steps = 0;             // a cross-site stage's H (diloco.inner_steps)
  std::string codec;               // and its delta codec (diloco.codec)
  int layers = 0, heads = 0, channels = 0;  // the model's shape
  std::uint64_t params = 0;                 // its parameter count (model::make_param_layout)
  std::string tokenizer;                    // data.tokenizer: "" (GPT-2 BPE), "bytes", or a tokenizer.json
};

struct stage_fact {
  std::string name, state, node, waiting, precision;
  std::uint64_t step = 0, total_steps = 0, memory_bytes = 0;
  double loss = 0, first_loss = 0, tokens_per_s = 0;
  std::uint32_t attempts = 0, min_trainers = 0, max_trainers = 0;
  std::uint64_t started_unix_ns = 0, finished_unix_ns = 0;
  std::vector<std::string> members;  // the trainers running it (a group's or a cross-site stage's)
  std::vector<site_fact> sites;
  std::vector<std::string> missing_sites;
  std::vector<step_point> steps;  // its metrics log, when this host can read it
  stage_config config;
  bool hpo = false;  // an hpo (search) stage
};

// The data a stage trained on: a dataset at ingest (its catalogue entry, and
// the rules its latest import rejected documents by) or a text file on this host.
struct dataset_fact {
  std::string name;  // the dataset's name, or the text file's path
  bool text_file = false;
  std::uint64_t documents = 0, tokens = 0, rejects = 0;
  bool tokens_estimated = false;  // a text file for GPT-2 BPE: its bytes / 4
  std::vector<std::pair<std::string, std::uint64_t>> rejects_by_rule;  // of the first `sampled`, most first
  std::uint64_t sampled = 0;
  std::string example;  // the first reject: "rule at file:line: detail"
  std::string source;   // the path its latest import read, when ingest still knows it
};

// One entry of the job's log (JobEvent).
struct event_fact {
  std::uint64_t unix_ns = 0;
  std::string stage, kind, text;
};

// One node of the roster (ListNodes).
struct node_fact {
  std::string id, service, zone, state;  // state: alive, suspect, dead
  std::uint32_t cpu_cores = 0;
  std::uint64_t memory_bytes = 0;
  double seen_s_ago = 0;
};

// The file system the job writes to (statvfs of its output directory).
struct disk_fact {
  std::string path;
  std::uint64_t free_bytes = 0, total_bytes = 0;
};

// One record of the job's audit trail.
struct audit_fact {
  std::uint64_t seq = 0;
  std::string action, service, reason;
  std::uint64_t unix_ns = 0;
  std::string principal, decision;
};

struct evidence {
  std::string job, name, template_name, state, message, zone, tenant;
  std::uint64_t submitted_unix_ns = 0, now_unix_ns = 0;
  std::vector<stage_fact> stages;
  std::vector<event_fact> events;
  std::vector<node_fact> nodes;  // empty when the roster could not be read
  std::vector<disk_fact> disks;
  std::vector<audit_fact> audit;
  std::vector<dataset_fact> datasets;  // what its stages trained on, once each
  std::vector<std::string> gaps;  // what could not be gathered, and why ("metrics of pretrain: not on this host")
};

}  // namespace loom::diagnose
