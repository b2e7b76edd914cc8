// The stage kinds: which the platform knows and which this trainer runs,
// and the checks of the kinds with their own sections ([diloco]; [align] and
// [reward] of rm, dpo and rl). Called by read_run_config (run_config.cpp)
// once the common sections are read.
#include "libs/runspec/toml_reader.hpp"

#include <algorithm>
#include <regex>

namespace loom::runspec {

namespace {
// Every kind the platform knows (ARCHITECTURE 8b), and the ones this trainer runs.
constexpr std::string_view all_kinds[] = {"lm", "sft", "rm", "dpo", "rl", "diloco", "hpo"};
constexpr std::string_view trainer_kinds[] = {"lm", "sft", "rm", "dpo", "rl", "diloco"};
}  // namespace

// The [diloco] section against the rest: the site count is the stage's group,
// P fits the model and H, the codec is libs/codec's, one dataset per site,
// min_sites at most the sites (its lower bound, 1, is the reader's).
status check_diloco(const toml::table& root, run_config& c, const std::string& origin, const key_lines* lines) {
  const diloco_settings& d = c.diloco;
  auto at = [&](const char* key) {
    const toml::table* t = root["diloco"].as_table();
    const toml::node* n = t ? t->get(key) : nullptr;
    return n ? where(origin, *n, std::string("diloco.") + key, lines) : origin;
  };
  static constexpr std::string_view codecs[] = {"fp32", "fp16", "bf16", "int8", "int4", "topk"};
  if (std::find(std::begin(codecs), std::end(codecs), d.codec) == std::end(codecs))
    return bad(at("codec"), "diloco.codec", "must be one of fp32, fp16, bf16, int8, int4, topk, got \"" + d.codec + "\"");
  if (d.fragments > static_cast<std::uint32_t>(c.model.layers))
    return bad(at("fragments"), "diloco.fragments",
               "must not exceed model.layers (" + std::to_string(c.model.layers) + "): a fragment is a set of layers");
  if (d.fragments > d.inner_steps)
    return bad(at("fragments"), "diloco.fragments",
               "must not exceed diloco.inner_steps (" + std::to_string(d.inner_steps) + "): fragments sync in turn within H");
  if (!d.datasets.empty() && d.datasets.size() != d.sites)
    return bad(at("datasets"), "diloco.datasets",
               "names " + std::to_string(d.datasets.size()) + " datasets for " + std::to_string(d.sites) +
                   " sites: one per site");
  if (d.sites < 1 || d.sites > 64)  // site_names read as an array: the integer's bounds again
    return bad(at("sites"), "diloco.sites", "must name 1 to 64 sites, got " + std::to_string(d.sites));
  for (std::size_t i = 0; i < d.site_names.size(); ++i) {
    const std::string& n = d.site_names[i];
    const bool shaped = n.size() <= 63 && std::regex_match(n, std::regex("[a-z0-9][a-z0-9-]*"));
    if (!shaped)
      return bad(at("sites"), "diloco.sites",
                 "must be site names ([a-z0-9][a-z0-9-]*, at most 63 characters, as `loom site token`), got \"" + n + "\"");
    for (std::size_t k = 0; k < i; ++k)
      if (d.site_names[k] == n) return bad(at("sites"), "diloco.sites", "names site \"" + n + "\" twice");
  }
  if (d.min_sites > d.sites)
    return bad(at("min_sites"), "diloco.min_sites",
               "must be between 1 and the number of sites (" + std::to_string(d.sites) + "), got " +
                   std::to_string(d.min_sites));
  for (const auto& name : d.datasets)
    if (name.empty() || name.find_first_of("/\\") != std::string::npos || name == "." || name == "..")
      return bad(at("datasets"), "diloco.datasets", "must be dataset names, not paths: \"" + name + "\"");
  const toml::table* par = root["parallel"].as_table();
  if (par && !par->empty() && (c.min_trainers != d.sites || c.max_trainers != d.sites))
    return bad(at("sites"), "diloco.sites",
               std::to_string(d.sites) + " disagrees with [parallel]: a diloco stage runs one trainer per site; "
                                         "leave [parallel] out");
  if (c.format == "sft") return make_error(errc::invalid_argument, origin + ": kind \"diloco\" pretrains (data.format \"lm\")");
  c.min_trainers = c.max_trainers = d.sites;
  return ok_status();
}

bool known_kind(std::string_view kind) {
  return std::find(std::begin(all_kinds), std::end(all_kinds), kind) != std::end(all_kinds);
}
bool runnable_kind(std::string_view kind) {
  return std::find(std::begin(trainer_kinds), std::end(trainer_kinds), kind) != std::end(trainer_kinds);
}

// The [align] and [reward] settings of an rm, dpo or rl stage.

status check_align(run_config& c, const std::string& kind, bool has_parent, const config_error& bad_cfg) {
  const align_settings& a = c.align;
  if (a.loss != "dpo" && a.loss != "ipo") return bad_cfg("align.loss must be \"dpo\" or \"ipo\", got \"" + a.loss + "\"");
  if (kind != "rm" && c.init_from.empty() && !has_parent)
    return bad_cfg("a " + kind + " stage starts from an SFT checkpoint: set model.init_from (or put an sft stage "
                   "before it in the job), got none");
  if (c.tokenizer == "bytes" && c.model.vocab < 256)
    return bad_cfg("data.tokenizer \"bytes\" needs model.vocab >= 256, got " + std::to_string(c.model.vocab));
  if (kind != "rl") {
    if (!a.reward_model.empty() || a.has_rule()) return bad_cfg("[reward] is read by rl stages only");
    return ok_status();
  }
  if (a.reward_model.empty() == !a.has_rule())
    return bad_cfg("an rl stage needs one reward: reward.model (an rm checkpoint) or a rule (reward.keywords, "
                   "reward.min_len, reward.max_len, reward.regex)");
  if (a.max_len > 0 && a.min_len > a.max_len) return bad_cfg("reward.min_len exceeds reward.max_len");
  if (c.batch % a.samples_per_prompt != 0)
    return bad_cfg("rl: train.batch " + std::to_string(c.batch) + " (completions per step) must be a multiple of "
                   "align.samples_per_prompt " + std::to_string(a.samples_per_prompt));
  if (c.grad_accum != 1) return bad_cfg("rl: train.grad_accum must be 1 (one on-policy batch per step)");
  if (a.max_new_tokens >= c.seq_len)
    return bad_cfg("rl: align.max_new_tokens must be below train.seq_len (the prompt needs room)");
  if (!a.regex.empty()) {
    try {
      std::regex re(a.regex);
    } catch (const std::regex_error& e) {
      return bad_cfg("reward.regex \"" + a.regex + "\" is not a regular expression: " + e.what());
    }
  }
  return ok_status();
}

}  // namespace loom::runspec
