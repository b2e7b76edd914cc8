#include "libs/runspec/run_config.hpp"
#include "libs/runspec/schema.hpp"
#include "libs/runspec/toml_reader.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/tokenizer/train/hf_json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>

namespace loom::runspec {
namespace {

// The keys each run section accepts (schema.hpp; [hpo] is libs/hpo's and the
// top-level kind is read apart): anything else is refused by name.
const std::map<std::string, std::set<std::string>, std::less<>>& known_keys() {
  static const std::map<std::string, std::set<std::string>, std::less<>> k = [] {
    std::map<std::string, std::set<std::string>, std::less<>> m;
    for (const key_spec& spec : schema())
      if (!spec.section.empty() && spec.section != "hpo") m[std::string(spec.section)].insert(std::string(spec.key));
    return m;
  }();
  return k;
}

}  // namespace

std::string where(const std::string& origin, const toml::node& n, const std::string& dotted,
                  const key_lines* lines) {
  const auto& src = n.source();
  if (src.begin.line == 0 && lines)
    if (auto it = lines->find(dotted); it != lines->end()) return origin + ":" + std::to_string(it->second);
  if (src.begin.line == 0 || (src.path && *src.path == "--set")) return origin + " (--set)";
  return origin + ":" + std::to_string(src.begin.line);
}

error bad(const std::string& at, const std::string& key, const std::string& why) {
  return make_error(errc::invalid_argument, at + ": " + key + " " + why);
}

namespace {

// Reads typed values out of one parsed document, remembering the first error.
class reader {
 public:
  reader(const toml::table& root, std::string origin, const key_lines* lines)
      : root_(root), origin_(std::move(origin)), lines_(lines) {}

  template <typename Int>
  void integer(std::string_view sec, std::string_view key, Int& out, std::int64_t lo, std::int64_t hi) {
    if (!declared(sec, key, value_kind::integer, value_kind::integer_or_names)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    auto v = n->value_exact<std::int64_t>();
    if (!v) return fail(*n, sec, key, "must be an integer");
    if (*v < lo || *v > hi)
      return fail(*n, sec, key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " +
                                    std::to_string(*v));
    out = static_cast<Int>(*v);
  }
  template <typename Real>
  void real(std::string_view sec, std::string_view key, Real& out, double lo, double hi) {
    if (!declared(sec, key, value_kind::real)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    std::optional<double> v = n->value_exact<double>();
    if (!v) {
      if (auto i = n->value_exact<std::int64_t>()) v = static_cast<double>(*i);
    }
    if (!v) return fail(*n, sec, key, "must be a number");
    if (!std::isfinite(*v) || *v < lo || *v > hi) {
      char buf[160];
      std::snprintf(buf, sizeof buf, "must be in [%g, %g], got %g", lo, hi, *v);
      return fail(*n, sec, key, buf);
    }
    out = static_cast<Real>(*v);
  }
  void boolean(std::string_view sec, std::string_view key, bool& out) {
    if (!declared(sec, key, value_kind::boolean)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    auto v = n->value_exact<bool>();
    if (!v) return fail(*n, sec, key, "must be true or false");
    out = *v;
  }
  // A string that is no path: a word (format, codec, regex) or a name (a dataset's).
  void word(std::string_view sec, std::string_view key, std::string& out) {
    if (!declared(sec, key, value_kind::word, value_kind::name)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    auto v = n->value_exact<std::string>();
    if (!v) return fail(*n, sec, key, "must be a string");
    out = *v;
  }
  // An array of strings.
  void words(std::string_view sec, std::string_view key, std::vector<std::string>& out) {
    if (!declared(sec, key, value_kind::words, value_kind::names, value_kind::integer_or_names)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    const toml::array* a = n->as_array();
    if (!a) return fail(*n, sec, key, "must be an array of strings");
    std::vector<std::string> v;
    for (const toml::node& e : *a) {
      auto w = e.value_exact<std::string>();
      if (!w || w->empty()) return fail(*n, sec, key, "must be an array of non-empty strings");
      v.push_back(*w);
    }
    out = std::move(v);
  }
  // A path (schema.hpp: the key is typed path), resolved against the config
  // file's folder when relative, and recorded in `paths` — every path value
  // read, by key: what the checks on a run's files walk. A path key's
  // alternative word (data.tokenizer = "bytes") is taken as it is.
  void path(std::string_view sec, std::string_view key, std::string& out) {
    if (!declared(sec, key, value_kind::path)) return;
    const toml::node* n = find(sec, key);
    if (!n) return;
    auto v = n->value_exact<std::string>();
    if (!v) return fail(*n, sec, key, "must be a string");
    const key_spec* spec = find_key(sec, key);
    std::filesystem::path p(*v);
    if (v->rfind("${", 0) == 0 || (!spec->word_instead.empty() && *v == spec->word_instead)) {
      out = *v;  // a reference the scheduler fills at placement (job_template.hpp), or the key's word
    } else {
      if (!v->empty() && p.is_relative()) p = std::filesystem::path(origin_).parent_path() / p;
      out = v->empty() ? std::string() : p.lexically_normal().string();
    }
    const std::string dotted = std::string(sec) + "." + std::string(key);
    std::erase_if(paths, [&](const auto& kv) { return kv.first == dotted; });
    paths.emplace_back(dotted, out);
  }

  std::vector<std::pair<std::string, std::string>> paths;  // (key, value) of every path read

  bool has(std::string_view sec, std::string_view key) const { return find(sec, key) != nullptr; }
  bool is_array(std::string_view sec, std::string_view key) const {
    const toml::node* n = find(sec, key);
    return n && n->is_array();
  }

  std::optional<error> first_error;

 private:
  const toml::node* find(std::string_view sec, std::string_view key) const {
    const toml::table* t = root_[sec].as_table();
    return t ? t->get(key) : nullptr;
  }
  // Whether the schema gives section.key one of `kinds`; a read the schema
  // does not back (a key added to the reader only, or read as another kind)
  // is a broken invariant of this library: internal, naming the key.
  template <typename... Kinds>
  bool declared(std::string_view sec, std::string_view key, Kinds... kinds) {
    const key_spec* spec = find_key(sec, key);
    if (spec && ((spec->kind == kinds) || ...)) return true;
    if (!first_error)
      first_error = make_error(errc::internal, "run spec key " + std::string(sec) + "." + std::string(key) +
                                                   (spec ? " is read as another kind than its schema's (schema.cpp)"
                                                         : " is read but not in the schema (schema.cpp)"));
    return false;
  }
  void fail(const toml::node& n, std::string_view sec, std::string_view key, const std::string& why) {
    const std::string dotted = std::string(sec) + "." + std::string(key);
    if (!first_error) first_error = bad(where(origin_, n, dotted, lines_), dotted, why);
  }
  const toml::table& root_;
  std::string origin_;
  const key_lines* lines_;
};

status check_known_keys(const toml::table& root, const std::string& origin, const key_lines* lines) {
  for (auto&& [sec, node] : root) {
    if (sec.str() == "job" || sec.str() == "stage" || sec.str() == "ingest")
      continue;  // a job template's own sections (ingest: template_info.hpp)
    if (sec.str() == "hpo") continue;  // an hpo stage's search: libs/hpo reads it (hpo_stage.hpp)
    if (sec.str() == "kind") continue;                         // the stage's kind: read below
    auto it = known_keys().find(sec.str());
    if (it == known_keys().end())
      return bad(where(origin, node), "[" + std::string(sec.str()) + "]",
                 "is not a section (known: model, data, train, optim, checkpoint, anomaly, output, parallel, "
                 "diloco, export, align, reward)");
    const toml::table* t = node.as_table();
    if (!t) return bad(where(origin, node), std::string(sec.str()), "must be a table");
    for (auto&& [key, value] : *t)
      if (!it->second.count(std::string(key.str())))
        return bad(where(origin, value, std::string(sec.str()) + "." + std::string(key.str()), lines),
                   std::string(sec.str()) + "." + std::string(key.str()), "is not a known key");
  }
  return ok_status();
}

status apply_override(toml::table& root, const std::string& kv) {
  auto eq = kv.find('=');
  auto dot = kv.find('.');
  if (eq != std::string::npos && kv.substr(0, eq) == "kind") {  // the one key outside a section
    auto v = override_value(kv.substr(eq + 1));
    if (!v) return make_error(errc::invalid_argument, "--set kind: " + v.err().message);
    (*v)->visit([&](auto&& x) { root.insert_or_assign("kind", x); });
    return ok_status();
  }
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return make_error(errc::invalid_argument, "--set " + quoted_text(kv) + ": expected section.key=value");
  const std::string sec = kv.substr(0, dot), key = kv.substr(dot + 1, eq - dot - 1), value = kv.substr(eq + 1);
  auto v = override_value(value);
  if (!v) return make_error(errc::invalid_argument, "--set " + sec + "." + key + ": " + v.err().message);
  toml::node_view slot = root[sec];
  if (!slot) root.insert(sec, toml::table{});
  toml::table* t = root[sec].as_table();
  if (!t) return make_error(errc::invalid_argument, "--set " + kv + ": " + sec + " is not a table");
  (*v)->visit([&](auto&& x) { t->insert_or_assign(key, x); });
  return ok_status();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> run_config::input_paths() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, value] : path_values) {
    const key_spec* spec = find_key(key);
    if (value.empty() || value.rfind("${", 0) == 0 || !spec || !rule_of(spec->file).read ||
        (!spec->word_instead.empty() && value == spec->word_instead))
      continue;
    out.emplace_back(key, value);
  }
  return out;
}

void run_config::drop_path(const std::string& key, std::string& field) {
  field.clear();
  std::erase_if(path_values, [&](const auto& kv) { return kv.first == key; });
}

result<run_config> read_run_config(const toml::table& root, const std::string& origin, const key_lines* lines,
                                   bool has_parent) {
  if (auto st = check_known_keys(root, origin, lines); !st) return st.err();
  run_config c;
  reader r(root, origin, lines);
  std::string kind;
  if (const toml::node* k = root.get("kind")) {
    if (!k->is_string()) return bad(where(origin, *k, "kind", lines), "kind", "must be a string (lm, sft, rm, dpo, rl, diloco)");
    kind = *k->value<std::string>();
  }
  r.integer("model", "layers", c.model.layers, 1, 256);
  r.integer("model", "heads", c.model.heads, 1, 256);
  r.integer("model", "channels", c.model.channels, 1, 65536);
  r.integer("model", "max_seq_len", c.model.max_seq_len, 1, 1 << 20);
  r.integer("model", "vocab", c.model.vocab, 1, 1 << 24);
  c.model.padded_vocab = 0;
  r.integer("model", "padded_vocab", c.model.padded_vocab, 1, 1 << 24);
  if (c.model.padded_vocab == 0) c.model.padded_vocab = (c.model.vocab + 127) / 128 * 128;
  r.path("model", "init_from", c.init_from);
  r.path("data", "shards", c.shards);
  r.path("data", "text", c.text);
  r.path("data", "sft", c.sft);
  r.path("data", "prefs", c.prefs);
  r.boolean("data", "synthetic_prefs", c.synthetic_prefs);
  r.real("data", "held_out", c.held_out, 0.01, 0.9);
  r.word("data", "dataset", c.dataset);
  r.word("data", "format", c.format);
  r.boolean("data", "shuffle", c.shuffle);
  r.boolean("data", "local", c.local);
  r.path("data", "tokenizer", c.tokenizer);  // a tokenizer.json, or "bytes"
  r.integer("train", "batch", c.batch, 1, 1 << 16);
  r.integer("train", "seq_len", c.seq_len, 1, 1 << 20);
  r.integer("train", "grad_accum", c.grad_accum, 1, 1 << 16);
  r.integer("train", "steps", c.steps, 1, 1 << 30);
  r.integer("train", "seed", c.seed, 0, INT64_MAX);
  r.integer("train", "threads", c.threads, 0, 1024);
  r.word("train", "precision", c.precision);
  r.real("optim", "lr", c.lr, 0.0, 10.0);
  r.real("optim", "min_lr", c.min_lr, 0.0, 10.0);
  r.integer("optim", "warmup_steps", c.warmup_steps, 0, 1 << 30);
  r.real("optim", "weight_decay", c.adam.weight_decay, 0.0, 10.0);
  r.real("optim", "beta1", c.adam.beta1, 0.0, 0.999999);
  r.real("optim", "beta2", c.adam.beta2, 0.0, 0.999999);
  r.real("optim", "eps", c.adam.eps, 1e-30, 1.0);
  r.real("optim", "grad_clip", c.grad_clip, 0.0, 1e9);
  r.integer("checkpoint", "every_steps", c.every_steps, 0, 1 << 30);
  // Wall time: every_seconds (default 600); every_minutes is its older spelling.
  double minutes = -1;
  r.real("checkpoint", "every_minutes", minutes, 0.0, 1e6);
  r.real("checkpoint", "every_seconds", c.every_seconds, 0.0, 1e8);
  if (minutes >= 0) {
    if (r.has("checkpoint", "every_seconds") && !r.first_error)
      r.first_error = bad(origin, "checkpoint.every_minutes", "and checkpoint.every_seconds both given: keep one");
    c.every_seconds = minutes * 60;
  }
  r.integer("checkpoint", "keep", c.keep, 1, 1000);
  r.real("anomaly", "spike_zscore", c.spike_zscore, 0.0, 1e6);
  r.integer("anomaly", "spike_window", c.spike_window, 2, 1 << 20);
  r.integer("anomaly", "max_rollbacks", c.max_rollbacks, 0, 1 << 20);
  r.real("anomaly", "diverge_ratio", c.diverge_ratio, 0.0, 1e6);
  if (c.diverge_ratio != 0 && c.diverge_ratio < 1.1 && !r.first_error)
    r.first_error = bad(origin, "anomaly.diverge_ratio",
                        "is " + std::to_string(c.diverge_ratio) +
                            ": want 0 (no divergence check) or at least 1.1 (that many times the first loss)");
  r.path("output", "dir", c.out_dir);
  // The stage's group: trainers = N (a gang), or min_trainers / max_trainers (elastic).
  std::uint32_t gang = 0;
  r.integer("parallel", "trainers", gang, 1, max_group);
  c.min_trainers = gang ? gang : 1;
  r.integer("parallel", "min_trainers", c.min_trainers, 1, max_group);
  c.max_trainers = gang ? gang : c.min_trainers;
  r.integer("parallel", "max_trainers", c.max_trainers, 1, max_group);
  r.real("parallel", "timeout_s", c.parallel_timeout_s, 1.0, 86400.0);
  diloco_settings& d = c.diloco;
  // sites = N (N sites of this deployment) or sites = ["north", "south"] (edge sites by name).
  if (r.is_array("diloco", "sites")) {
    r.words("diloco", "sites", d.site_names);
    d.sites = static_cast<std::uint32_t>(d.site_names.size());
  } else {
    r.integer("diloco", "sites", d.sites, 1, max_group);
  }
  r.integer("diloco", "inner_steps", d.inner_steps, 1, 1 << 30);
  r.word("diloco", "codec", d.codec);
  r.integer("diloco", "fragments", d.fragments, 1, 256);
  r.real("diloco", "quorum", d.quorum, 0.01, 1.0);
  r.real("diloco", "outer_lr", d.outer_lr, 0.0, 10.0);
  r.real("diloco", "outer_momentum", d.outer_momentum, 0.0, 0.999);
  r.integer("diloco", "staleness", d.staleness, 0, 1000);
  r.real("diloco", "deadline_min_s", d.deadline_min_s, 0.0, 3600.0);
  r.words("diloco", "datasets", d.datasets);
  r.real("diloco", "sync_wait_s", d.sync_wait_s, 0.0, 3600.0);
  r.integer("diloco", "min_sites", d.min_sites, 1, max_group);  // at most diloco.sites: check_diloco
  r.real("export", "max_loss", c.export_max_loss, 0.0, 1e6);
  align_settings& a = c.align;
  r.real("align", "beta", a.beta, 1e-6, 1e3);
  r.word("align", "loss", a.loss);
  r.path("align", "reference", a.reference);
  r.integer("align", "samples_per_prompt", a.samples_per_prompt, 2, 1024);
  r.integer("align", "max_new_tokens", a.max_new_tokens, 1, 1 << 16);
  r.real("align", "kl_coef", a.kl_coef, 0.0, 1e3);
  r.real("align", "temperature", a.temperature, 1e-3, 100.0);
  r.integer("align", "top_k", a.top_k, 0, 1 << 24);
  r.real("align", "kl_bound", a.kl_bound, 0.0, 1e6);
  r.integer("align", "eval_every", a.eval_every, 0, 1 << 30);
  r.path("reward", "model", a.reward_model);
  r.words("reward", "keywords", a.keywords);
  r.integer("reward", "min_len", a.min_len, 0, 1 << 20);
  r.integer("reward", "max_len", a.max_len, 0, 1 << 20);
  r.word("reward", "regex", a.regex);
  if (kind == "hpo") r.path("hpo", "validation", c.hpo_validation);  // the rest of [hpo]: libs/hpo
  if (r.first_error) return *r.first_error;
  c.path_values = std::move(r.paths);

  const config_error bad_cfg = [&](const std::string& why) { return make_error(errc::invalid_argument, origin + ": " + why); };
  if (auto st = c.model.validate(); !st) return bad_cfg(st.err().message);
  if (!kind.empty()) {
    if (!known_kind(kind))
      return bad_cfg("kind \"" + kind + "\" is not a stage kind (lm, sft, rm, dpo, rl, diloco, hpo)");
    if (!runnable_kind(kind) && kind != "hpo")
      return bad_cfg("kind \"" + kind + "\" is not run by this trainer (it runs lm, sft, rm, dpo, rl and diloco)");
  }
  // An alignment stage reads its pairs only: a job's shared data.text (its
  // pretrain and sft stages') does not count as a second source there.
  if ((kind == "rm" || kind == "dpo" || kind == "rl") && (!c.prefs.empty() || c.synthetic_prefs)) {
    c.drop_path("data.shards", c.shards);
    c.drop_path("data.text", c.text);
    c.dataset.clear();
    c.drop_path("data.sft", c.sft);
  }
  const int sources = !c.shards.empty() + !c.text.empty() + !c.dataset.empty() + !c.sft.empty() +
                      !c.prefs.empty() + c.synthetic_prefs;
  if (kind == "diloco" && !c.diloco.datasets.empty()) {  // per-site datasets are the stage's source
    if (sources != 0)
      return bad_cfg("diloco.datasets names each site's dataset: leave data.shards, data.text, data.dataset and "
                     "data.sft unset");
    c.dataset = c.diloco.datasets.front();  // site 0's; the trainer of site r takes datasets[r]
  } else if (sources != 1) {
    return bad_cfg("set exactly one of data.shards, data.text, data.dataset, data.sft, data.prefs and "
                   "data.synthetic_prefs");
  }
  if (c.format != "lm" && c.format != "sft" && c.format != "preference")
    return bad_cfg("data.format must be \"lm\", \"sft\" or \"preference\", got \"" + c.format + "\"");
  if (c.precision != "fp32" && c.precision != "bf16" && c.precision != "auto")
    return bad_cfg("train.precision must be \"fp32\", \"bf16\" or \"auto\", got \"" + c.precision + "\"");
  if (!c.sft.empty()) c.format = "sft";
  if (!c.prefs.empty() || c.synthetic_prefs) c.format = "preference";
  const bool aligning = kind == "rm" || kind == "dpo" || kind == "rl";
  if (aligning) {
    if (c.format != "preference" || (c.prefs.empty() && !c.synthetic_prefs))
      return bad_cfg("kind \"" + kind + "\" reads preference pairs: set data.prefs (JSONL {\"prompt\",\"chosen\","
                     "\"rejected\"}) or data.synthetic_prefs = true");
    if (auto st = check_align(c, kind, has_parent, bad_cfg); !st) return st.err();
    c.kind = kind;
  } else {
    if (c.format == "preference")
      return bad_cfg("data.format \"preference\" is read by the alignment kinds: set kind = \"rm\", \"dpo\" or \"rl\"");
    if (c.tokenizer == "bytes" && (c.format != "lm" || c.text.empty() || c.model.vocab < 256))
      return bad_cfg("data.tokenizer \"bytes\" applies to preference data and to data.text with data.format \"lm\" "
                     "(model.vocab >= 256)");
    if (kind == "sft") c.format = "sft";
    else if (!kind.empty() && c.format == "sft" && c.sft.empty())
      return bad_cfg("kind \"" + kind + "\" with data.format \"sft\": choose one");
    c.kind = kind == "diloco" || kind == "hpo" ? kind : c.format;
    if (kind == "hpo" && c.format != "lm")
      return bad_cfg("kind \"hpo\" searches over pretraining runs (data.format \"lm\"), got \"" + c.format + "\"");
  }
  if (c.is_diloco())  // a [diloco] section of another kind's stage (a template's shared sections) is ignored
    if (auto st = check_diloco(root, c, origin, lines); !st) return st.err();
  if (c.dataset.find_first_of("/\\") != std::string::npos || c.dataset == "." || c.dataset == "..")
    return bad_cfg("data.dataset must be a dataset name, not a path: " + c.dataset);
  if (c.seq_len > c.model.max_seq_len)
    return bad_cfg("train.seq_len " + std::to_string(c.seq_len) + " exceeds model.max_seq_len " +
                   std::to_string(c.model.max_seq_len));
  if (c.local && (c.dataset.empty() || c.format != "lm" || c.is_diloco() || kind == "hpo"))
    return bad_cfg("data.local reads the shards of data.dataset placed on each trainer's own node: it applies to an "
                   "lm stage (not sft, diloco or hpo) with data.dataset");
  if (c.local && c.grad_accum % static_cast<int>(c.max_trainers) != 0 && c.min_trainers == c.max_trainers)
    return bad_cfg("data.local with " + std::to_string(c.max_trainers) + " trainers needs train.grad_accum a multiple "
                   "of " + std::to_string(c.max_trainers) + " (each member reads the same number of batches from its "
                   "own node's shards), got " + std::to_string(c.grad_accum));
  if (c.min_lr > c.lr) return bad_cfg("optim.min_lr must not exceed optim.lr");
  if (c.min_trainers > c.max_trainers)
    return bad_cfg("parallel.min_trainers " + std::to_string(c.min_trainers) + " exceeds parallel.max_trainers " +
                   std::to_string(c.max_trainers));
  if (!c.is_diloco() && c.max_trainers > static_cast<std::uint32_t>(c.grad_accum))
    return bad_cfg(std::to_string(c.max_trainers) + " trainers but train.grad_accum is " +
                   std::to_string(c.grad_accum) +
                   ": each trainer takes whole micro-batches of a step, so set train.grad_accum to at least " +
                   std::to_string(c.max_trainers) +
                   " (the step's tokens are then batch x seq_len x grad_accum, whatever the group's size)");
  return c;
}

result<run_config> parse_run_config(std::string_view text, const std::string& origin,
                                    const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& e) {
    return make_error(errc::invalid_argument, origin + ":" + std::to_string(e.source().begin.line) + ": " +
                                                  std::string(e.description()));
  }
  for (const std::string& kv : overrides)
    if (auto st = apply_override(root, kv); !st) return st.err();
  return read_run_config(root, origin, nullptr);
}

status check_run_files(const run_config& c, const std::string& origin) {
  if (c.tokenizer.empty() || c.tokenizer == "bytes") return ok_status();
  auto tok = tokenizer::load_hf_json(c.tokenizer);
  if (!tok) return make_error(tok.code(), origin + ": data.tokenizer: " + tok.err().message);
  if (static_cast<std::size_t>(c.model.vocab) < tok->vocab_size())
    return make_error(errc::invalid_argument,
                      origin + ": model.vocab " + std::to_string(c.model.vocab) + " is smaller than data.tokenizer's " +
                          std::to_string(tok->vocab_size()) + " tokens (" + c.tokenizer +
                          "): set model.vocab to at least " + std::to_string(tok->vocab_size()));
  return ok_status();
}

result<run_config> load_run_config(const std::string& path, const std::vector<std::string>& overrides) {
  auto text = files::read_file(path);
  if (!text) return make_error(text.code(), "config " + path + ": " + text.err().message);
  auto c = parse_run_config(*text, path, overrides);
  if (!c) return c;
  if (auto st = check_run_files(*c, path); !st) return st.err();
  return c;
}

}  // namespace loom::runspec
