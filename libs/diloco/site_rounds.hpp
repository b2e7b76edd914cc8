// site_rounds: a site's arithmetic for its rounds, without the wire: its
// site_state (anchor, merge rule) and, per fragment, the uplink's error
// feedback. The delta it encodes and the global versions it applies are the
// same bytes and the same floats whether site_client carries them over the
// delta socket or a simulator (sim/diloco) hands them to the aggregator's
// round logic in process:
//
//   encode_delta(p)   Δ_p = θ_a[p] − θ[p] (site_state::pseudo_gradient),
//                     then e += Δ_p; q = enc(e); e −= dec(q) (codec::error_feedback)
//   apply(p, …)       an outer update U (the next version): θ_new = θ_a[p] − U;
//                     parameters: θ_new itself — more than one version on, the
//                     residual is dropped (it was against anchors long gone);
//                     then merged into θ by the site's rule (site_state).
// One owner (a trainer's sync thread, a simulator's loop); not thread-safe.
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/codec/error_feedback.hpp"
#include "libs/diloco/site_state.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace loom::diloco {

class site_rounds {
 public:
  // A site (re)joining at `global` (the full vector) whose fragments are at
  // `versions`, sending with `uplink`. Without feedback the residual is
  // dropped before each delta: the codec alone (an ablation, diloco_bench).
  // invalid_argument as site_state::make.
  static result<site_rounds> make(fragment_plan plan, std::span<const float> global,
                                   std::vector<std::uint64_t> versions, codec::codec_id uplink,
                                   site_options merge = {}, bool feedback = true);

  // Fragment p's delta from `local` (the full vector) into payload, for round
  // version(p). invalid_argument for a bad fragment, sizes or a non-finite Δ.
  status encode_delta(int p, std::span<const float> local, std::vector<std::byte>& payload);
  // Fragment p at `version`: an outer update when is_update, else the global
  // parameters (gathered, size(p)), merged into local. conflict as
  // site_state::apply_update / apply_global.
  status apply(int p, std::uint64_t version, bool is_update, std::span<const float> values, std::span<float> local);

  const site_state& state() const { return state_; }
  const fragment_plan& plan() const { return state_.plan(); }
  std::uint64_t version(int p) const { return state_.version(p); }
  codec::codec_id uplink(int p) const { return uplink_[std::size_t(p)].codec(); }
  std::span<const float> last_delta() const { return delta_; }  // Δ of the last encode_delta, before the codec

 private:
  site_rounds(site_state st, std::vector<codec::error_feedback> up, bool feedback)
      : state_(std::move(st)), uplink_(std::move(up)), feedback_(feedback) {}

  site_state state_;
  std::vector<codec::error_feedback> uplink_;  // per fragment
  bool feedback_ = true;
  std::vector<float> delta_;
};

}  // namespace loom::diloco
