// model_check: every pre-export check of a model version (issue 16 item 6),
// run where the checkpoint lies: a cloud trainer, for `loom model check` and
// `loom model export` (services/trainer/export, issue 25 item 3). Each check
// runs whatever the others found, so a report lists every failure:
//   signature      ckpt::verify_snapshot with <data>/keys/checkpoint.key (the
//                  HMAC and every file's SHA-256), and model.safetensors'
//                  SHA-256 equal to the registry's params_sha256
//   finite         no NaN or Inf in any parameter (tensor and first index named)
//   shapes         the checkpoint's model metadata equals the version's config
//                  and every tensor has the shape that config gives
//   tokenizer      the tokenizer ("gpt2" or a tokenizer.json) fits the model:
//                  its size equals model.vocab (what the exports write), it
//                  has <|endoftext|>, its merges name real tokens
//   held_out_loss  finite and at most the threshold (held_out.hpp), on
//                  --held-out, else the version's training text, else (a
//                  dpo or rl stage on generated data) its nearest ancestor's
//   compliance     the lineage's import reports (compliance.hpp)
// The report keeps what an export needs (config, parameters, tokenizer) once
// they loaded. Plain values; one caller at a time.
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/tokenizer/train/hf_json.hpp"

#include <atomic>
#include <optional>
#include <string>
#include <vector>

namespace loom::modelcheck {

struct check_request {
  std::string data_dir;          // keys/checkpoint.key; the tenant's datasets/<name>/report.json
  std::string tenant;            // the version's: whose datasets its lineage names ("" = default)
  std::string checkpoint;        // the version's step-N directory
  std::string params_sha256;     // as the registry recorded it
  std::string config_toml;       // the version's resolved run config
  std::string parent_checkpoint; // the parent version's: stands in for a model.init_from the config
                                 // lacks (a dpo or rl stage the job started from its previous stage)
  std::string tokenizer;         // "gpt2" or a tokenizer.json path
  std::vector<std::string> data;     // this version's own data sources ("text:/x", "dataset:N")
  std::vector<std::string> lineage;  // every data source of it and its ancestors
  std::string held_out_file;     // "" = the tail of the first of `data` (none: of `lineage`)
  std::optional<double> max_loss;  // --max-loss
  bool override_compliance = false;
  // Where files may be read from (files/confine.hpp); empty = anywhere (tests,
  // tools run by a user on their own files). held_out_roots: the held-out
  // file the caller named (the service's import roots); read_roots: the
  // version's own text/sft/shards sources and tokenizer file, which came from
  // its validated run config (the import roots and the job outputs).
  std::vector<std::string> held_out_roots;
  std::vector<std::string> read_roots;
  // Set by the caller to end early (a trainer stopping, an export cancelled):
  // checks not yet run fail "not run: stopped", the held-out loss between windows.
  const std::atomic<bool>* stop = nullptr;
};

enum class check_status { pass, fail, not_assessed, overridden };
std::string_view to_string(check_status s);

struct check_outcome {
  std::string name;
  check_status status = check_status::pass;
  std::string detail;  // what was found; for a failure every problem, "; "-separated
  double seconds = 0;
};

struct check_report {
  std::vector<check_outcome> checks;
  double seconds = 0;
  // Loaded along the way (export uses them when every check passed).
  std::optional<model::gpt2_config> cfg;
  std::vector<float> params;
  std::optional<tokenizer::bpe_spec> tok;

  bool passed() const;  // no check failed
  std::vector<const check_outcome*> failures() const;
};

// The loss threshold: the smaller of the config's export.max_loss (when set)
// and `max_loss`; ln(vocab) — a uniform guess's loss — when neither is.
double loss_threshold(double config_max_loss, std::optional<double> max_loss, int vocab);

check_report run_checks(const check_request& r);

}  // namespace loom::modelcheck
