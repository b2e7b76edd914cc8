// run_config: everything one training run needs — one stage of a job, or one
// `loom-trainer train --config F` — read from TOML plus `--set
// section.key=value` overrides. The one parser of run settings: the scheduler
// validates every stage with it at submit (job_template.hpp), the trainer
// receives the resolved text and reads it with it again. Every key is known: an
// unknown key, a wrong type or an out-of-range value is invalid_argument naming
// the key and the file:line (or "--set"). Relative paths are resolved against
// the config file's folder. Pure: no file is read (check_run_files does that,
// where the files are). Plain values; no shared state.
//
//   kind          lm | sft | rm | dpo | rl | diloco (what the trainer runs); hpo: a
//                 search over lm trials that the scheduler runs (hpo_stage.hpp; its
//                 [hpo] section is libs/hpo's and skipped here)
//   [diloco]      sites inner_steps codec fragments quorum outer_lr outer_momentum
//                 staleness deadline_min_s datasets sync_wait_s min_sites: a cross-site pretraining stage
//                 (kind = "diloco"; see diloco_settings below)
//   [model]       layers heads channels max_seq_len vocab padded_vocab init_from
//   [data]        shards | text | dataset | sft | prefs | synthetic_prefs   format
//                 shuffle   tokenizer ("bytes": preference data, or data.text as lm)   held_out
//   [align]       (rm dpo rl) beta loss reference samples_per_prompt max_new_tokens
//                 kl_coef temperature top_k kl_bound eval_every
//   [reward]      (rl) model | keywords min_len max_len regex
//   [train]       batch seq_len grad_accum steps seed threads precision (fp32 | bf16 | auto)
//   [optim]       lr min_lr warmup_steps weight_decay beta1 beta2 eps grad_clip
//   [checkpoint]  every_steps every_seconds (every_minutes: older spelling) keep
//   [anomaly]     spike_zscore spike_window max_rollbacks
//   [output]      dir
//   [parallel]    trainers | min_trainers max_trainers, timeout_s: the stage's group
//                 (a gang of N, or elastic in a range); a run in a group of W
//                 trainers computes grad_accum / W of each step's micro-batches,
//                 so W may not exceed train.grad_accum
// Alignment stages (rm, dpo, rl) read preference pairs: data.format =
// "preference" with data.prefs (JSONL {"prompt","chosen","rejected"}) or
// data.synthetic_prefs = true (the built-in synthetic set from train.seed;
// services/trainer/align/synthetic_prefs.hpp); data.held_out (default 0.1) is
// the share of pairs (by prompt) kept for evaluation. data.tokenizer = "bytes"
// tokenizes them byte by byte (model.vocab >= 256; the tiny templates).
// dpo and rl need model.init_from (the SFT parent: a stage after the first has
// it from the scheduler): refused without one. align.reference (default: the
// init_from checkpoint) is the frozen reference. rl's reward is either
// reward.model, an rm stage's checkpoint (in a job: "${stage.NAME.checkpoint}",
// filled by the scheduler at placement; refused when it opens if it holds no
// reward head), or a rule: the mean of the parts given — reward.keywords (the
// share present), reward.min_len / max_len (1 inside the bounds, in bytes),
// reward.regex (1 on a full match). align.kl_bound (0 = none) fails the stage's
// final evaluation when KL to the reference exceeds it.
// A job template's [job], [stage.*] and [ingest] sections are ignored here (the
// scheduler reads them), so one template file serves both.
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/model/memory.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runspec {

// AdamW's settings (the trainer's engine::adamw_config takes these values).
struct adamw_settings {
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.1f;  // matrices only
};

// A `diloco` stage (issue 15): `sites` trainers, one per site, each runs H
// inner AdamW steps on its own data between syncs with the aggregator
// (services/aggregator), which averages the sites' pseudo-gradients and takes
// the outer step. Where the aggregator is: the deployment's (endpoints.json
// and keys/curve/aggregator.pub, like every service a trainer calls); the
// site's rank-0 trainer starts the aggregation (services/trainer/README.md).
struct diloco_settings {
  std::uint32_t sites = 2;          // trainers of the stage, one per site (the group's size)
  // sites = ["north", "south"]: member r is placed on a trainer of edge site
  // site_names[r] (its zone), re-placed inside it only, trains on that site's
  // data and joins the cloud's aggregator as that site. Empty (sites = N): the
  // N members are trainers of this deployment, named site-0 ... site-(N-1).
  std::vector<std::string> site_names;
  std::uint64_t inner_steps = 50;   // H: inner steps between two syncs of a fragment
  std::string codec = "int8";       // both directions (libs/codec name)
  std::uint32_t fragments = 1;      // P (Streaming DiLoCo); 1 <= P <= min(layers, H)
  double quorum = 1.0;              // fraction of the active sites that closes a round
  float outer_lr = 0;               // 0: the aggregator's defaults (Nesterov 0.7 / 0.9)
  float outer_momentum = 0;         // with outer_lr set: μ (0 = none)
  std::uint64_t staleness = 2;      // S: a late delta up to S rounds old is folded in
  // The least a round waits for the missing sites before it closes by its
  // (adaptive) deadline; 0 = the aggregator's default (1 s).
  double deadline_min_s = 0;
  // Per-site datasets (site r trains on datasets[r]); empty = data.* at every
  // site, in an order of its own (train.seed + r).
  std::vector<std::string> datasets;
  // A site a round ahead of the others (a fragment due while its last delta's
  // version has not come) waits at most this long for it before it trains on
  // (the sync itself runs on a thread of its own; an unreachable aggregator
  // is never waited for): a slow or cut site holds the others up by the
  // aggregator's deadline at most, and a fast one itself by this.
  double sync_wait_s = 10;
  // The sites that must have contributed (a delta the aggregator accepted)
  // for the stage to succeed: 1 <= min_sites <= sites; 0 (not given) = every
  // site. Below every site, the stage reports which ones contributed.
  std::uint32_t min_sites = 0;
};

// The alignment stages' settings ([align] and [reward]).
struct align_settings {
  float beta = 0.1f;              // DPO/IPO β
  std::string loss = "dpo";       // dpo | ipo
  std::string reference;          // frozen reference checkpoint; "" = init_from
  int samples_per_prompt = 8;     // rl: k completions per prompt (train.batch must be a multiple)
  int max_new_tokens = 10;        // rl
  float kl_coef = 0.05f;          // rl: β_kl
  float temperature = 1.0f;       // rl sampling
  int top_k = 0;                  // rl sampling; 0 = whole vocabulary
  double kl_bound = 0;            // max KL to the reference at the final evaluation; 0 = no bound
  int eval_every = 0;             // held-out evaluation every N steps besides the end; 0 = end only
  // rl reward: a reward model's checkpoint, or a rule (any of the parts below).
  std::string reward_model;
  std::vector<std::string> keywords;
  int min_len = 0, max_len = 0;   // 0 = unbounded
  std::string regex;
  bool has_rule() const { return !keywords.empty() || min_len > 0 || max_len > 0 || !regex.empty(); }
};

struct run_config {
  std::string kind = "lm";  // lm | sft | rm | dpo | rl | diloco (an lm stage synced across sites) | hpo (a search)
  model::gpt2_config model;
  // A snapshot root or step directory whose parameters start this run (an SFT
  // stage from pretrain's final checkpoint); "" = random init from train.seed.
  std::string init_from;

  // Exactly one source:
  std::string shards;   // a shard directory with manifest.json,
  std::string text;     // a text file the trainer tokenizes (GPT-2) itself,
  std::string dataset;  // an ingested dataset's name (run_options::dataset_root/<name>), or
  std::string sft;      // a JSONL file of chat records {"messages":[{"role","content"}…]}, or
  std::string prefs;    // a JSONL file of preference pairs {"prompt","chosen","rejected"}, or
  bool synthetic_prefs = false;  // the built-in synthetic preference set (seeded by train.seed)
  double held_out = 0.1;         // preference data: the share of pairs kept for evaluation
  // "lm": every token is a target. "sft": only the assistant's tokens are
  // (sft_data.hpp); from data.text, records are generated from its paragraphs.
  // "preference": pairs (rm, dpo, rl).
  std::string format = "lm";
  bool shuffle = true;
  // data.dataset read from each trainer's own node: a member fetches and reads
  // only the shards placed on its node (libs/shards/placement.hpp), so a group
  // reads its data where it lies. The stream differs from the whole dataset's
  // (each member its own), so it is a different run; false: every member reads
  // every shard, the numbers of one trainer doing the whole step.
  bool local = false;
  // A tokenizer.json (`loom data train-tokenizer`; tokenizer::load_hf_json) that
  // data.text / data.sft are tokenized with and samples decode with; "" = GPT-2.
  // Its vocabulary must fit model.vocab (check_run_files).
  std::string tokenizer;

  int batch = 4;
  int seq_len = 64;
  int grad_accum = 1;
  int steps = 100;
  std::uint64_t seed = 1337;
  int threads = 0;  // 0 = every core of the machine
  // The engine's matmuls: "fp32", "bf16" (oneDNN's bf16 matmul with fp32
  // accumulation, where the CPU multiplies bf16 natively: AMX or AVX512-BF16;
  // elsewhere the run trains in fp32 and says so) or "auto" (bf16 where it is
  // native, else fp32). libs/engine/bf16.hpp.
  std::string precision = "fp32";

  adamw_settings adam;
  float lr = 6e-4f;
  float min_lr = 6e-5f;
  int warmup_steps = 0;
  float grad_clip = 1.0f;

  int every_steps = 100;     // snapshot period in steps; 0 = only at the end
  double every_seconds = 600;  // and/or in wall time (default 10 minutes); 0 = off
  int keep = 3;              // verified snapshots kept

  // A non-finite loss, or one more than spike_zscore standard deviations above
  // the mean of the last spike_window steps (0 = no spike check), rolls back to
  // the last snapshot and skips that batch, at most max_rollbacks times a run.
  double spike_zscore = 6.0;
  int spike_window = 50;
  int max_rollbacks = 10;
  // Divergence (issue 31): a loss above diverge_ratio times the run's start
  // (the mean of its first 5 losses; above it by more than 1 too) from the
  // second step on is an anomaly
  // too, rolled back like a spike; a run that keeps diverging fails as
  // diverged instead of training on at a crawl. 0 = no check.
  double diverge_ratio = 2.0;

  std::string out_dir;

  // The stage's group: min..max trainers (a gang when equal).
  std::uint32_t min_trainers = 1, max_trainers = 1;

  align_settings align;
  // Data-parallel group: no word from the previous member for this long ends
  // the step with an error (the trainer then asks the scheduler to re-form the group).
  double parallel_timeout_s = 120;

  diloco_settings diloco;  // read only for kind = "diloco"
  bool is_diloco() const { return kind == "diloco"; }
  // [export] max_loss: the highest held-out loss `loom model check` accepts
  // for this stage's model (0 = unset: ln(vocab), a uniform guess's loss).
  // Not in math_hash: it changes no number of the run.
  double export_max_loss = 0;

  // SHA-256 hex over every field that changes the numbers (model, data source,
  // train, optim); not over checkpoint or output settings. A resumed run
  // must have the same hash to be bitwise-equal to an uninterrupted one.
  std::string math_hash() const;
  // What one member of the stage's group needs in memory (it holds
  // grad_accum / min_trainers micro-batches of each step, rounded up).
  model::training_memory memory() const;
  bool alignment() const { return kind == "rm" || kind == "dpo" || kind == "rl"; }
  // An hpo stage's held-out text (hpo.validation; "" = the tail of data.text).
  // Read here for kind = "hpo" only, so the rule on paths sees it; libs/hpo
  // reads the rest of [hpo].
  std::string hpo_validation;
  // Every path-typed value this config read (schema.hpp), by key, as
  // resolved: the reader records each one, so no path key can be missed by
  // the checks on them (input_files.hpp). Values a kind does not use (an rm
  // stage's shared data.text) are dropped with the field.
  std::vector<std::pair<std::string, std::string>> path_values;
  // The paths the run reads — path_values without output.dir (written), the
  // word "bytes" of data.tokenizer and "${stage.NAME.checkpoint}" references
  // (filled by the scheduler at placement); only those set.
  std::vector<std::pair<std::string, std::string>> input_paths() const;  // (key, path)
  // Clears field `field`, read from path key `key`, and its path_values entry.
  void drop_path(const std::string& key, std::string& field);
};

// Known stage kinds and whether this trainer runs them.
bool known_kind(std::string_view kind);
bool runnable_kind(std::string_view kind);

// Parses TOML text; `origin` (a path) names it in errors and anchors relative paths.
// `overrides` are "section.key=value" strings applied on top (value in TOML
// syntax; a bare word is a string).
// A dpo or rl config without model.init_from is refused (no SFT parent).
result<run_config> parse_run_config(std::string_view toml, const std::string& origin,
                                    const std::vector<std::string>& overrides = {});
// What the config names on this machine: the tokenizer loads and its
// vocabulary fits model.vocab. invalid_argument / not_found naming the key.
status check_run_files(const run_config& c, const std::string& origin);
// Reads, parses and checks a config file (parse_run_config + check_run_files).
result<run_config> load_run_config(const std::string& path, const std::vector<std::string>& overrides = {});

}  // namespace loom::runspec
