#include "libs/diloco/grant/stage_spec.hpp"

#include "libs/crypto/hash.hpp"
#include "loom/v1/aggregator.pb.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

namespace loom::diloco {

std::string aggregation_name(std::string_view job, std::string_view stage) {
  const std::string whole = std::string(job) + "." + std::string(stage);
  std::string name = whole;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '-';
  // Too long: a prefix and 8 hex digits of the whole name's SHA-256, so two
  // long stage names of one job never share an aggregation (or its tombstone).
  if (name.size() > 64) name = name.substr(0, 55) + "-" + crypto::sha256_hex(whole).substr(0, 8);
  return name;
}

std::vector<std::string> stage_sites(const runspec::run_config& cfg) {
  if (!cfg.diloco.site_names.empty()) return cfg.diloco.site_names;
  std::vector<std::string> out;
  for (std::uint32_t r = 0; r < cfg.diloco.sites; ++r) out.push_back("site-" + std::to_string(r));
  return out;
}

void stage_spec(const runspec::run_config& cfg, const std::string& name, const std::string& init_from,
                loom::v1::AggregationSpec* s) {
  s->Clear();
  s->set_job(name);
  s->set_gpt2_layers(static_cast<std::uint32_t>(cfg.model.layers));
  s->set_gpt2_heads(static_cast<std::uint32_t>(cfg.model.heads));
  s->set_gpt2_channels(static_cast<std::uint32_t>(cfg.model.channels));
  s->set_gpt2_max_seq_len(static_cast<std::uint32_t>(cfg.model.max_seq_len));
  s->set_gpt2_vocab(static_cast<std::uint32_t>(cfg.model.vocab));
  s->set_gpt2_padded_vocab(static_cast<std::uint32_t>(cfg.model.padded_vocab));
  s->set_fragments(cfg.diloco.fragments);
  s->set_sync_every(cfg.diloco.inner_steps);
  s->set_codec(cfg.diloco.codec);
  s->set_quorum_fraction(cfg.diloco.quorum);
  s->set_staleness_bound(cfg.diloco.staleness);
  s->set_deadline_min_ms(static_cast<std::uint64_t>(cfg.diloco.deadline_min_s * 1000));
  s->set_outer_lr(cfg.diloco.outer_lr);
  s->set_outer_momentum(cfg.diloco.outer_momentum);
  // A first stage: every site and the aggregator draw GPT-2's init from the
  // same seed (no site's snapshot is readable at the cloud); a later one
  // starts from the job's previous stage, which the cloud holds.
  if (init_from.empty()) s->set_init_seed(std::max<std::uint64_t>(1, cfg.seed));
  else s->set_init_snapshot(init_from);
  // Saturating: the run spec's own bounds on the factors allow 2^82.
  std::uint64_t tokens = 1;
  for (int f : {cfg.steps, cfg.batch, cfg.seq_len, cfg.grad_accum}) {
    const auto x = static_cast<std::uint64_t>(std::max(1, f));
    tokens = tokens > UINT64_MAX / x ? UINT64_MAX : tokens * x;
  }
  s->set_max_delta_tokens(tokens);
  s->set_min_sites(cfg.diloco.min_sites);
}

}  // namespace loom::diloco
