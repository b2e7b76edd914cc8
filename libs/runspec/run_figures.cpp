// run_config's figures derived from its fields: the math hash that decides
// whether a snapshot continues a run, and the memory estimate one trainer
// needs (run_config.hpp).
#include "libs/runspec/run_config.hpp"

#include "libs/crypto/hash.hpp"

#include <algorithm>
#include <cstdio>
#include <string>

namespace loom::runspec {

std::string run_config::math_hash() const {
  char buf[1024];
  std::snprintf(buf, sizeof buf,
                "model %d %d %d %d %d %d init=%s|data shards=%s text=%s dataset=%s sft=%s format=%s shuffle=%d|"
                "train %d %d %d %d %llu %d|optim %a %a %d %a %a %a %a %a",
                model.layers, model.heads, model.channels, model.max_seq_len, model.vocab, model.padded_vocab,
                init_from.c_str(), shards.c_str(), text.c_str(), dataset.c_str(), sft.c_str(), format.c_str(), shuffle ? 1 : 0, batch, seq_len, grad_accum,
                steps, static_cast<unsigned long long>(seed), threads, double(lr), double(min_lr), warmup_steps,
                double(adam.weight_decay), double(adam.beta1), double(adam.beta2), double(adam.eps),
                double(grad_clip));
  // A tokenizer changes the numbers; appended only when set, so hashes of
  // GPT-2 runs (and their snapshots) stay what they were.
  std::string all = tokenizer.empty() ? std::string(buf) : std::string(buf) + "|tokenizer=" + tokenizer;
  // The precision asked for changes the numbers; appended only when not fp32,
  // so hashes of fp32 runs (and their snapshots) stay what they were.
  if (precision != "fp32") all += "|precision=" + precision;
  if (local) all += "|data.local";  // each node's share: another stream; set only, so hashes stay
  if (is_diloco()) {  // appended only for diloco stages, as the tokenizer
    std::snprintf(buf, sizeof buf, "|diloco %u %llu %s %u %a %a %a %llu %a", diloco.sites,
                  static_cast<unsigned long long>(diloco.inner_steps), diloco.codec.c_str(), diloco.fragments,
                  diloco.quorum, double(diloco.outer_lr), double(diloco.outer_momentum),
                  static_cast<unsigned long long>(diloco.staleness), diloco.deadline_min_s);
    all += buf;
    for (const auto& site : diloco.site_names) all += " " + site;  // named sites only: counts hash as before
    if (diloco.min_sites > 0) all += " min_sites=" + std::to_string(diloco.min_sites);  // set only: hashes as before
  }
  // Alignment settings likewise only for the kinds that read them.
  if (alignment()) {
    const align_settings& a = align;
    std::snprintf(buf, sizeof buf, "|%s prefs=%s synth=%d held=%a|align %a %s ref=%s k=%d new=%d kl=%a t=%a top=%d",
                  kind.c_str(), prefs.c_str(), synthetic_prefs ? 1 : 0, held_out, double(a.beta), a.loss.c_str(),
                  a.reference.c_str(), a.samples_per_prompt, a.max_new_tokens, double(a.kl_coef),
                  double(a.temperature), a.top_k);
    all += buf;
    all += "|reward model=" + a.reward_model + " min=" + std::to_string(a.min_len) + " max=" +
           std::to_string(a.max_len) + " regex=" + a.regex;
    for (const auto& k : a.keywords) all += " kw=" + k;
  }
  return crypto::sha256_hex(all);
}

model::training_memory run_config::memory() const {
  const std::uint64_t world = is_diloco() ? 1 : std::max<std::uint32_t>(1, min_trainers);  // a site does every micro-batch
  const std::uint64_t held = (std::uint64_t(grad_accum) + world - 1) / world;
  if (alignment()) {  // a policy of 2P rows (rm, dpo) or B rows (rl), and a reference or reward model of the same
    const std::uint64_t rows = kind == "rl" ? std::uint64_t(batch) : 2 * std::uint64_t(batch);
    auto m = model::estimate_training(model, rows, std::uint64_t(seq_len), held, false, precision != "fp32");
    if (kind != "rm") m = model::estimate_training(model, 2 * rows, std::uint64_t(seq_len), held, false, precision != "fp32");
    return m;
  }
  return model::estimate_training(model, std::uint64_t(batch), std::uint64_t(seq_len), held, format == "sft",
                                  precision != "fp32");
}

}  // namespace loom::runspec
