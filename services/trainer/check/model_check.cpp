#include "services/trainer/check/model_check.hpp"

#include "libs/atrest/object.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/export/inputs.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/dataset_dirs.hpp"
#include "libs/runspec/run_config.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/trainer/check/compliance.hpp"
#include "services/trainer/check/held_out.hpp"
#include "services/trainer/check/tensor_checks.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace loom::modelcheck {
namespace {

using clock_type = std::chrono::steady_clock;

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : "; ") + s;
  return out;
}

check_outcome outcome(std::string name, const std::vector<std::string>& problems, std::string ok_detail) {
  if (problems.empty()) return {std::move(name), check_status::pass, std::move(ok_detail)};
  return {std::move(name), check_status::fail, joined(problems)};
}

// (a) the snapshot's signature and hashes, and the registry's parameter hash.
check_outcome signature(const check_request& r, const std::string& model_bytes_sha) {
  std::vector<std::string> problems;
  const auto step = ckpt::parse_step_dir(std::filesystem::path(r.checkpoint).filename().string());
  auto key = auth::load_token_key(r.data_dir + "/keys/checkpoint.key");
  if (!step) problems.push_back("checkpoint " + r.checkpoint + " is not a snapshot's step-N directory");
  else if (!key) problems.push_back("checkpoint signing key: " + key.err().message);
  else
    for (auto& p : ckpt::verify_snapshot(r.checkpoint, *step, *key)) problems.push_back(std::move(p));
  if (!model_bytes_sha.empty() && model_bytes_sha != r.params_sha256)
    problems.push_back("model.safetensors hashes to " + model_bytes_sha + ", the registry recorded " + r.params_sha256);
  return outcome("signature", problems, "manifest signature and every file's SHA-256 verified; params sha256 " +
                                            r.params_sha256.substr(0, 16) + "... as recorded");
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4f", v);
  return buf;
}

result<tokenizer::bpe_spec> load_spec(const std::string& name) {
  if (name == "gpt2" || name.empty()) {
    auto b = tokenizer::bpe::load_gpt2();
    if (!b) return b.err();
    return tokenizer::spec_from_ranks(*b);
  }
  auto text = files::read_file(name);
  if (!text) return text.err();
  return tokenizer::parse_hf_json(*text, name);
}

// (e) the held-out loss against its threshold.
check_outcome held_out_loss(const check_request& r, const check_report& rep, const runspec::run_config* spec) {
  if (!rep.cfg || rep.params.empty())
    return {"held_out_loss", check_status::fail, "not run: the parameters did not load (see shapes)"};
  result<held_out_tokens> toks = make_error(errc::not_found, "");
  if (!r.held_out_file.empty()) {
    toks = tokens_of_text_tail(r.held_out_file, r.tokenizer, r.held_out_roots);
    if (toks) toks->source += " (--held-out)";
  } else {
    // A stage that read no text (dpo or rl on preference pairs or prompts) is
    // held to the text its nearest ancestor trained on (r.lineage lists the
    // version's own sources first, then its parent's, and so on).
    auto texty = [](const std::string& e) {
      return e.rfind("text:", 0) == 0 || e.rfind("dataset:", 0) == 0 || e.rfind("shards:", 0) == 0;
    };
    auto own = std::find_if(r.data.begin(), r.data.end(), texty);
    auto any = std::find_if(r.lineage.begin(), r.lineage.end(), texty);
    const bool inherited = own == r.data.end() && any != r.lineage.end();
    const std::string src = own != r.data.end() ? *own
                            : inherited         ? *any
                            : !r.data.empty()   ? r.data.front()
                                                : "";
    const auto colon = src.find(':');
    const std::string kind = src.substr(0, colon), what = colon == std::string::npos ? "" : src.substr(colon + 1);
    const std::uint64_t want = std::uint64_t(max_windows) * std::uint64_t(spec ? spec->seq_len : 64) + 1;
    if (kind == "text") toks = tokens_of_text_tail(what, r.tokenizer, r.read_roots);
    else if (kind == "dataset") toks = tokens_of_shards_tail(layout::tenant_dataset_dir(r.data_dir + "/datasets", r.tenant, what), want);
    else if (kind == "shards") {
      if (auto in = r.read_roots.empty() ? result<std::string>(what) : files::confined(r.read_roots, what); !in)
        toks = in.err();
      else
        toks = tokens_of_shards_tail(what, want);
    }
    else
      return {"held_out_loss", check_status::fail,
              "no text to evaluate on: the version read " + (src.empty() ? std::string("nothing recorded") : src) +
                  "; give --held-out FILE"};
    if (toks)
      toks->source += std::string(inherited ? " (an ancestor's " : " (") +
                      "training data: a sanity bound, not a held-out score; --held-out FILE for one)";
  }
  if (!toks) return {"held_out_loss", check_status::fail, "held-out text: " + toks.err().message};
  auto loss = mean_loss(*rep.cfg, rep.params, toks->ids, spec ? spec->seq_len : rep.cfg->max_seq_len, r.stop);
  if (!loss) return {"held_out_loss", check_status::fail, "loss on " + toks->source + ": " + loss.err().message};
  const double limit = loss_threshold(spec ? spec->export_max_loss : 0, r.max_loss, rep.cfg->vocab);
  const std::string what = "loss " + number(loss->loss) + " over " + std::to_string(loss->tokens) + " tokens (" +
                           std::to_string(loss->windows) + " windows) of " + toks->source + ", threshold " +
                           number(limit);
  if (!std::isfinite(loss->loss)) return {"held_out_loss", check_status::fail, "not finite: " + what};
  if (loss->loss > limit) return {"held_out_loss", check_status::fail, "above the threshold: " + what};
  return {"held_out_loss", check_status::pass, what};
}

check_outcome compliance(const check_request& r) {
  compliance_finding f = assess_lineage(r.lineage, layout::tenant_datasets_root(r.data_dir + "/datasets", r.tenant));
  if (!f.problems.empty()) {
    if (r.override_compliance)
      return {"compliance", check_status::overridden, "overridden by an admin: " + joined(f.problems)};
    return {"compliance", check_status::fail, joined(f.problems) + " (an admin may override: --override-compliance --reason TEXT)"};
  }
  if (!f.not_assessed.empty())
    return {"compliance", check_status::not_assessed,
            "not assessed: " + joined(f.not_assessed) + (f.notes.empty() ? "" : "; " + joined(f.notes))};
  return {"compliance", check_status::pass, f.notes.empty() ? "nothing in the lineage" : joined(f.notes)};
}

}  // namespace

std::string_view to_string(check_status s) {
  switch (s) {
    case check_status::pass: return "pass";
    case check_status::fail: return "fail";
    case check_status::not_assessed: return "not_assessed";
    case check_status::overridden: return "overridden";
  }
  return "?";
}

bool check_report::passed() const { return failures().empty(); }

std::vector<const check_outcome*> check_report::failures() const {
  std::vector<const check_outcome*> out;
  for (const auto& c : checks)
    if (c.status == check_status::fail) out.push_back(&c);
  return out;
}

double loss_threshold(double config_max_loss, std::optional<double> max_loss, int vocab) {
  if (config_max_loss > 0 && max_loss) return std::min(config_max_loss, *max_loss);
  if (config_max_loss > 0) return config_max_loss;
  if (max_loss) return *max_loss;
  return std::log(static_cast<double>(vocab));
}

check_report run_checks(const check_request& r) {
  const auto t0 = clock_type::now();
  check_report rep;
  auto timed = [&](const char* name, auto&& fn) {
    const auto s = clock_type::now();
    check_outcome c = r.stop && r.stop->load() ? check_outcome{name, check_status::fail, "not run: stopped"} : fn();
    c.seconds = std::chrono::duration<double>(clock_type::now() - s).count();
    rep.checks.push_back(std::move(c));
  };
  // model.safetensors is read once, before anything is verified: a corrupt
  // file still gets every check that can look at it.
  const std::string mfile = r.checkpoint + "/" + ckpt::gpt2_model_file;
  auto bytes = atrest::read_object(mfile);  // sealed at rest: the plaintext (its tags verified)
  const std::string bytes_sha = bytes ? crypto::sha256_hex(*bytes) : "";
  timed("signature", [&] { return signature(r, bytes_sha); });
  result<ckpt::safetensors_file> file = bytes ? ckpt::parse_safetensors(std::move(*bytes), mfile) : bytes.err();

  auto spec = runspec::parse_run_config(r.config_toml, "the version's config");
  // The scheduler hands a stage its previous stage's checkpoint beside the
  // config, so a dpo or rl stage's recorded config has no model.init_from.
  if (!spec && !r.parent_checkpoint.empty() && r.parent_checkpoint.find('\'') == std::string::npos)
    spec = runspec::parse_run_config(r.config_toml, "the version's config",
                                     {"model.init_from='" + r.parent_checkpoint + "'"});
  timed("finite", [&]() -> check_outcome {
    if (!file) return {"finite", check_status::fail, "not scanned: " + file.err().message};
    return outcome("finite", non_finite(*file), std::to_string(file->tensors().size()) + " tensors, every value finite");
  });
  timed("shapes", [&]() -> check_outcome {
    std::vector<std::string> problems;
    if (!file) return {"shapes", check_status::fail, "not checked: " + file.err().message};
    auto cfg = ckpt::gpt2_config_from(file->meta(), mfile);
    if (!cfg) return {"shapes", check_status::fail, cfg.err().message};
    if (!spec) problems.push_back("the version's config does not parse: " + spec.err().message);
    else problems = config_differences(*cfg, spec->model);
    for (auto& p : shape_problems(*file, *cfg)) problems.push_back(std::move(p));
    if (problems.empty()) {
      auto params = ckpt::gpt2_flat_params(*file, *cfg, mfile);  // shape_problems found none: it reads
      if (!params) return {"shapes", check_status::fail, params.err().message};
      rep.cfg = *cfg;
      rep.params = std::move(*params);
    }
    return outcome("shapes", problems,
                   "L=" + std::to_string(cfg->layers) + " NH=" + std::to_string(cfg->heads) + " C=" +
                       std::to_string(cfg->channels) + " maxT=" + std::to_string(cfg->max_seq_len) + " V=" +
                       std::to_string(cfg->vocab) + " Vp=" + std::to_string(cfg->padded_vocab) +
                       ": metadata, config and all 16 tensors agree");
  });
  timed("tokenizer", [&]() -> check_outcome {
    if (r.tokenizer != "gpt2" && !r.tokenizer.empty() && !r.read_roots.empty())
      if (auto in = files::confined(r.read_roots, r.tokenizer); !in)
        return {"tokenizer", check_status::fail, "tokenizer " + r.tokenizer + ": " + in.err().message};
    auto tok = load_spec(r.tokenizer);
    if (!tok) return {"tokenizer", check_status::fail, "tokenizer " + r.tokenizer + ": " + tok.err().message};
    const std::size_t size = tok->tokens.size() + tok->specials.size();
    if (spec && spec->tokenizer != (r.tokenizer == "gpt2" ? "" : r.tokenizer))
      return {"tokenizer", check_status::fail,
              "the registry says " + r.tokenizer + ", the config's data.tokenizer is " +
                  (spec->tokenizer.empty() ? "GPT-2's" : spec->tokenizer)};
    if (!rep.cfg) return {"tokenizer", check_status::fail, "not checked against the model: the parameters did not load"};
    if (size > static_cast<std::size_t>(rep.cfg->vocab))
      return {"tokenizer", check_status::fail,
              r.tokenizer + " has " + std::to_string(size) + " tokens, more than the model's vocab " +
                  std::to_string(rep.cfg->vocab)};
    if (auto eot = exporter::check_inputs(*rep.cfg, rep.params, *tok); !eot)
      return {"tokenizer", check_status::fail, eot.err().message};
    rep.tok = std::move(*tok);
    return {"tokenizer", check_status::pass,
            r.tokenizer + ": " + std::to_string(size) + " tokens = model vocab, <|endoftext|> present"};
  });
  timed("held_out_loss", [&] { return held_out_loss(r, rep, spec ? &*spec : nullptr); });
  timed("compliance", [&] { return compliance(r); });
  rep.seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  return rep;
}

}  // namespace loom::modelcheck
