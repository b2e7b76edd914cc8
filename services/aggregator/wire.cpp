#include "services/aggregator/wire.hpp"

#include "libs/crypto/hash.hpp"
#include "loom/v1/aggregator.pb.h"

#include <algorithm>
#include <chrono>

namespace loom::aggregator {
namespace {

error bad(std::string_view msg, std::string what) {
  return make_error(errc::invalid_argument, std::string(msg) + ": " + what);
}

bool good_codec_name(const std::string& c) {
  if (c.empty() || c.size() > 32) return false;
  for (char ch : c)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_')) return false;
  return true;
}

// The checks both headers share. `msg` names the message in the error.
status check_common(std::string_view msg, const std::string& job, const std::string& codec, std::uint64_t elements,
                    std::uint64_t payload_bytes, const std::string& sha) {
  // A bound on the payload, not a codec rule: even fp32 is 4 bytes a value,
  // and the slack covers a codec's own header (block scales live per block).
  constexpr std::uint64_t header_slack = 4096;
  if (job.empty()) return bad(msg, "job is empty");
  if (!good_codec_name(codec)) return bad(msg, "codec '" + codec + "' is not 1-32 of [a-z0-9_]");
  if (elements == 0) return bad(msg, "element_count is 0");
  if (elements > (std::uint64_t{1} << 40)) return bad(msg, "element_count " + std::to_string(elements) + " is absurd");
  if (payload_bytes == 0) return bad(msg, "payload_bytes is 0");
  if (payload_bytes > elements * 4 + header_slack)
    return bad(msg, "payload_bytes " + std::to_string(payload_bytes) + " exceeds fp32 for " + std::to_string(elements) +
                        " values plus " + std::to_string(header_slack));
  if (sha.size() != sha256_bytes)
    return bad(msg, "payload_sha256 has " + std::to_string(sha.size()) + " bytes, not 32");
  return ok_status();
}

}  // namespace

result<delta_header> from_wire(const loom::v1::DeltaHeader& h) {
  constexpr std::string_view msg = "DeltaHeader";
  if (auto s = check_common(msg, h.job(), h.codec(), h.element_count(), h.payload_bytes(), h.payload_sha256());
      !s.ok())
    return s.err();
  if (h.site().empty()) return bad(msg, "site is empty");
  delta_header d;
  d.job = h.job();
  d.meta = {h.site(), h.round(), h.fragment(), h.base_version(), h.element_count(), h.tokens()};
  d.codec = h.codec();
  d.payload_bytes = h.payload_bytes();
  d.payload_sha256 = h.payload_sha256();
  return d;
}

void to_wire(const delta_header& h, loom::v1::DeltaHeader* out) {
  out->set_job(h.job);
  out->set_site(h.meta.site);
  out->set_round(h.meta.round);
  out->set_fragment(h.meta.fragment);
  out->set_base_version(h.meta.base_version);
  out->set_codec(h.codec);
  out->set_element_count(h.meta.elements);
  out->set_payload_bytes(h.payload_bytes);
  out->set_tokens(h.meta.tokens);
  out->set_payload_sha256(h.payload_sha256);
}

result<global_update_header> from_wire(const loom::v1::GlobalUpdateHeader& h) {
  constexpr std::string_view msg = "GlobalUpdateHeader";
  if (auto s = check_common(msg, h.job(), h.codec(), h.element_count(), h.payload_bytes(), h.payload_sha256());
      !s.ok())
    return s.err();
  global_update_header g;
  switch (h.kind()) {
    case loom::v1::GLOBAL_PARAMS: g.kind = update_kind::params; break;
    case loom::v1::OUTER_UPDATE:
      g.kind = update_kind::outer_update;
      if (h.version() == 0 || h.base_version() != h.version() - 1)
        return bad(msg, "an outer update to version " + std::to_string(h.version()) + " must have base_version " +
                            (h.version() == 0 ? std::string("< 0") : std::to_string(h.version() - 1)) + ", got " +
                            std::to_string(h.base_version()));
      break;
    default: return bad(msg, "kind is not set");
  }
  g.job = h.job();
  g.fragment = h.fragment();
  g.version = h.version();
  g.base_version = h.base_version();
  g.codec = h.codec();
  g.elements = h.element_count();
  g.payload_bytes = h.payload_bytes();
  g.payload_sha256 = h.payload_sha256();
  g.round = h.round();
  g.contributors = h.contributors();
  return g;
}

void to_wire(const global_update_header& h, loom::v1::GlobalUpdateHeader* out) {
  out->set_job(h.job);
  out->set_fragment(h.fragment);
  out->set_version(h.version);
  out->set_base_version(h.base_version);
  out->set_kind(h.kind == update_kind::params ? loom::v1::GLOBAL_PARAMS : loom::v1::OUTER_UPDATE);
  out->set_codec(h.codec);
  out->set_element_count(h.elements);
  out->set_payload_bytes(h.payload_bytes);
  out->set_payload_sha256(h.payload_sha256);
  out->set_round(h.round);
  out->set_contributors(h.contributors);
}

status check_payload(std::uint64_t payload_bytes, std::string_view payload_sha256, std::string_view payload) {
  if (payload.size() != payload_bytes)
    return make_error(errc::corruption, "truncated frame: the header says " + std::to_string(payload_bytes) +
                                            " payload bytes, the frame has " + std::to_string(payload.size()));
  if (crypto::as_view(crypto::sha256(payload)) != payload_sha256)
    return make_error(errc::corruption, "payload SHA-256 mismatch: the frame is not the one its header describes");
  return ok_status();
}

result<aggregation_spec> from_wire(const loom::v1::AggregationSpec& w) {
  constexpr std::string_view msg = "AggregationSpec";
  aggregation_spec s;
  if (!valid_job_name(w.job())) return bad(msg, "job '" + w.job() + "' is not 1-64 of [A-Za-z0-9._-]");
  s.job = w.job();
  s.flat_size = w.flat_size();
  if (s.flat_size == 0) {
    s.gpt2 = {static_cast<int>(w.gpt2_layers()),      static_cast<int>(w.gpt2_heads()),
              static_cast<int>(w.gpt2_channels()),    static_cast<int>(w.gpt2_max_seq_len()),
              static_cast<int>(w.gpt2_vocab()),       static_cast<int>(w.gpt2_padded_vocab())};
    if (auto v = s.gpt2.validate(); !v) return bad(msg, "gpt2 shape: " + v.err().message);
  }
  if (w.fragments() == 0 || w.fragments() > 1024) return bad(msg, "fragments must be in 1..1024");
  s.fragments = static_cast<int>(w.fragments());
  s.sync_every = w.sync_every();
  if (!w.codec().empty()) {
    auto c = codec::codec_from_string(w.codec());
    if (!c) return bad(msg, "codec '" + w.codec() + "' is not one of fp32 fp16 bf16 int8 int4 topk");
    s.codec = *c;
  }
  if (w.quorum_fraction() != 0) s.rounds.quorum_fraction = w.quorum_fraction();
  s.rounds.quorum_sites = static_cast<int>(w.quorum_sites());
  s.rounds.staleness_bound = w.staleness_bound();
  if (w.deadline_min_ms() > 0) {
    s.rounds.deadline_min = std::chrono::milliseconds(w.deadline_min_ms());
    s.rounds.deadline_initial = std::max(s.rounds.deadline_initial, s.rounds.deadline_min);
    s.rounds.deadline_max = std::max(s.rounds.deadline_max, s.rounds.deadline_min);
  }
  if (auto v = s.rounds.validate(); !v) return bad(msg, v.err().message);
  // top-k: its error feedback carries what momentum would (SparseLoCo); with
  // Nesterov on top the sparse updates ran away in diloco_bench (loss 9.2 vs
  // 3.1 with plain averaging), so plain averaging unless the job says otherwise.
  if (s.codec == codec::codec_id::topk) s.outer = diloco::outer_options::plain_average();
  if (w.outer_lr() != 0) {
    s.outer.lr = w.outer_lr();
    s.outer.momentum = w.outer_momentum();
    s.outer.nesterov = w.outer_momentum() > 0;
  }
  if (auto v = s.outer.validate(); !v) return bad(msg, v.err().message);
  if (!w.init_snapshot().empty() && w.init_seed() != 0) return bad(msg, "give init_snapshot or init_seed, not both");
  s.init_snapshot = w.init_snapshot();
  s.init_seed = w.init_seed();
  s.max_delta_tokens = w.max_delta_tokens();
  s.min_sites = w.min_sites();
  if (auto plan = make_plan(s); !plan) return bad(msg, plan.err().message);
  return s;
}

void to_wire(const aggregation_spec& s, loom::v1::AggregationSpec* out) {
  out->set_job(s.job);
  out->set_flat_size(s.flat_size);
  if (s.flat_size == 0) {
    out->set_gpt2_layers(s.gpt2.layers);
    out->set_gpt2_heads(s.gpt2.heads);
    out->set_gpt2_channels(s.gpt2.channels);
    out->set_gpt2_max_seq_len(s.gpt2.max_seq_len);
    out->set_gpt2_vocab(s.gpt2.vocab);
    out->set_gpt2_padded_vocab(s.gpt2.padded_vocab);
  }
  out->set_fragments(static_cast<std::uint32_t>(s.fragments));
  out->set_sync_every(s.sync_every);
  out->set_codec(std::string(codec::to_string(s.codec)));
  out->set_quorum_fraction(s.rounds.quorum_fraction);
  out->set_quorum_sites(static_cast<std::uint32_t>(s.rounds.quorum_sites));
  out->set_staleness_bound(s.rounds.staleness_bound);
  out->set_deadline_min_ms(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(s.rounds.deadline_min).count()));
  out->set_outer_lr(s.outer.lr);
  out->set_outer_momentum(s.outer.momentum);
  out->set_init_snapshot(s.init_snapshot);
  out->set_init_seed(s.init_seed);
  out->set_max_delta_tokens(s.max_delta_tokens);
  out->set_min_sites(s.min_sites);
}

void to_wire(const job_rounds& j, const std::string& job, std::uint32_t p, loom::v1::RoundStatus* out) {
  const auto& st = j.stats();
  out->set_job(job);
  out->set_fragment(p);
  out->set_round(j.open_round(p));
  out->set_version(j.optimizer().version(static_cast<int>(p)));
  out->set_active_sites(static_cast<std::uint32_t>(j.active_sites()));
  out->set_quorum(static_cast<std::uint32_t>(j.quorum()));
  out->set_arrived(static_cast<std::uint32_t>(j.on_time(p)));
  out->set_deadline_ms(static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(j.deadline(p) - j.opened(p)).count()));
  out->set_rounds_closed_total(st.rounds_closed);
  out->set_late_folded_total(st.late_folded);
  out->set_late_dropped_total(st.late_dropped());
  auto& rejected = *out->mutable_rejected_total();
  for (int r = 0; r < reject_reason_count; ++r)
    if (st.rejected[r] > 0) rejected[std::string(to_string(static_cast<reject_reason>(r)))] = st.rejected[r];
  out->set_last_outer_step_s(st.last_outer_step_s);
}

}  // namespace loom::aggregator
