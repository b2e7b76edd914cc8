#include "libs/runspec/schema.hpp"

#include <map>
#include <utility>

namespace loom::runspec {
namespace {

constexpr std::uint64_t MiB = 1ull << 20, GiB = 1ull << 30;

using V = value_kind;
using F = file_kind;

const std::vector<file_rule>& rules() {
  static const std::vector<file_rule> r{
      {F::none, "", false, false, 0, "not a path"},
      {F::text, "a text file", false, true, 1 * GiB,
       "the trainer reads the whole file and its token ids into memory to shard it once (up to 5x the file: "
       "4-byte ids of byte-level tokens); a larger corpus goes through `loom data import`, which streams it, "
       "and is named with data.dataset"},
      {F::held_out_text, "a held-out text file", false, true, 16 * MiB,
       "every segment of every trial reads and tokenizes it again, and only 128 windows of train.seq_len tokens "
       "spread over it are scored"},
      {F::jsonl, "a JSONL file", false, true, 256 * MiB,
       "the trainer reads it whole and parses every record into memory (several times the file's size)"},
      {F::tokenizer, "a tokenizer.json", false, true, 64 * MiB,
       "it is read whole and parsed into a vocabulary and merges; the largest published ones are about 20 MB"},
      {F::shards, "a shard directory", true, true, 0,
       "shards are mapped one at a time and each is checked against its manifest's size and SHA-256"},
      {F::snapshot, "a checkpoint directory", true, true, 0,
       "each file of a snapshot is checked against its manifest's size and SHA-256 before it is used"},
      {F::output, "an output directory", true, false, 0, "written by the run, never read as input"},
  };
  return r;
}

}  // namespace

const std::vector<key_spec>& schema() {
  static const std::vector<key_spec> s{
      {"", "kind", V::word},
      {"model", "layers", V::integer},
      {"model", "heads", V::integer},
      {"model", "channels", V::integer},
      {"model", "max_seq_len", V::integer},
      {"model", "vocab", V::integer},
      {"model", "padded_vocab", V::integer},
      {"model", "init_from", V::path, F::snapshot},
      {"data", "shards", V::path, F::shards},
      {"data", "text", V::path, F::text},
      {"data", "sft", V::path, F::jsonl},
      {"data", "prefs", V::path, F::jsonl},
      {"data", "synthetic_prefs", V::boolean},
      {"data", "held_out", V::real},
      {"data", "dataset", V::name},
      {"data", "format", V::word},
      {"data", "shuffle", V::boolean},
      {"data", "local", V::boolean},
      {"data", "tokenizer", V::path, F::tokenizer, "bytes"},
      {"train", "batch", V::integer},
      {"train", "seq_len", V::integer},
      {"train", "grad_accum", V::integer},
      {"train", "steps", V::integer},
      {"train", "seed", V::integer},
      {"train", "threads", V::integer},
      {"train", "precision", V::word},
      {"optim", "lr", V::real},
      {"optim", "min_lr", V::real},
      {"optim", "warmup_steps", V::integer},
      {"optim", "weight_decay", V::real},
      {"optim", "beta1", V::real},
      {"optim", "beta2", V::real},
      {"optim", "eps", V::real},
      {"optim", "grad_clip", V::real},
      {"checkpoint", "every_steps", V::integer},
      {"checkpoint", "every_seconds", V::real},
      {"checkpoint", "every_minutes", V::real},
      {"checkpoint", "keep", V::integer},
      {"anomaly", "spike_zscore", V::real},
      {"anomaly", "spike_window", V::integer},
      {"anomaly", "max_rollbacks", V::integer},
      {"anomaly", "diverge_ratio", V::real},
      {"output", "dir", V::path, F::output},
      {"parallel", "trainers", V::integer},
      {"parallel", "min_trainers", V::integer},
      {"parallel", "max_trainers", V::integer},
      {"parallel", "timeout_s", V::real},
      {"diloco", "sites", V::integer_or_names},
      {"diloco", "inner_steps", V::integer},
      {"diloco", "codec", V::word},
      {"diloco", "fragments", V::integer},
      {"diloco", "quorum", V::real},
      {"diloco", "outer_lr", V::real},
      {"diloco", "outer_momentum", V::real},
      {"diloco", "staleness", V::integer},
      {"diloco", "deadline_min_s", V::real},
      {"diloco", "datasets", V::names},
      {"diloco", "sync_wait_s", V::real},
      {"diloco", "min_sites", V::integer},
      {"export", "max_loss", V::real},
      {"align", "beta", V::real},
      {"align", "loss", V::word},
      {"align", "reference", V::path, F::snapshot},
      {"align", "samples_per_prompt", V::integer},
      {"align", "max_new_tokens", V::integer},
      {"align", "kl_coef", V::real},
      {"align", "temperature", V::real},
      {"align", "top_k", V::integer},
      {"align", "kl_bound", V::real},
      {"align", "eval_every", V::integer},
      {"reward", "model", V::path, F::snapshot},
      {"reward", "keywords", V::words},
      {"reward", "min_len", V::integer},
      {"reward", "max_len", V::integer},
      {"reward", "regex", V::word},
      // An hpo stage's search (libs/hpo/hpo_spec.hpp parses and checks the
      // table; the run-config reader reads hpo.validation of an hpo stage).
      {"hpo", "method", V::word},
      {"hpo", "trials", V::integer},
      {"hpo", "seed", V::integer},
      {"hpo", "grid_points", V::integer},
      {"hpo", "min_steps", V::integer},
      {"hpo", "max_steps", V::integer},
      {"hpo", "eta", V::integer},
      {"hpo", "validation", V::path, F::held_out_text},
      {"hpo", "space", V::table},
  };
  return s;
}

const key_spec* find_key(std::string_view section, std::string_view key) {
  // Asked for every key of every config parsed (the reader checks each read against it): an index.
  static const std::map<std::pair<std::string_view, std::string_view>, const key_spec*> index = [] {
    std::map<std::pair<std::string_view, std::string_view>, const key_spec*> m;
    for (const key_spec& k : schema()) m[{k.section, k.key}] = &k;
    return m;
  }();
  auto it = index.find({section, key});
  return it == index.end() ? nullptr : it->second;
}

const key_spec* find_key(std::string_view dotted) {
  const auto dot = dotted.find('.');
  if (dot == std::string_view::npos) return find_key("", dotted);
  return find_key(dotted.substr(0, dot), dotted.substr(dot + 1));
}

const file_rule& rule_of(file_kind kind) {
  for (const file_rule& r : rules())
    if (r.kind == kind) return r;
  return rules().front();
}

}  // namespace loom::runspec
