// cloud: DiLoCo sites and the cloud in one process, through the code that
// ships — the aggregator's round logic (services/aggregator aggregation:
// membership, quorum, deadlines, the outer step, the downlink with its error
// feedback) and each site's diloco::site_rounds (its anchor, merge rule and
// uplink), exchanging the same headers and payload bytes the delta socket and
// site_client carry. No sockets, no threads; a clock of its own: a round that
// waits for a site that did not send closes when close_late moves the clock
// past its deadline, as the service's timer would.
// Used by the simulators (local_rounds) and by the cross-process rounds test
// as its reference. Single-threaded.
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/diloco/site_rounds.hpp"
#include "libs/status/status.hpp"
#include "services/aggregator/aggregation.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace loom::sim {

struct cloud_site_options {
  codec::codec_id uplink = codec::codec_id::int8;
  bool error_feedback = true;  // false: the codec alone (an ablation)
};

class diloco_cloud {
 public:
  // An aggregation of `spec` at θ0 (in memory, not saved) joined by `sites`
  // sites named site-0.. (each a site_rounds at θ0). invalid_argument for a
  // bad spec or a θ0 of another size.
  static result<diloco_cloud> make(aggregator::aggregation_spec spec, std::span<const float> theta0, int sites,
                                   cloud_site_options site = {});

  // Site s's delta of fragment p from its parameters `local` (trained on
  // `tokens` tokens since its last delta of p), for the round of its version:
  // encoded by its site_rounds and submitted as the delta socket would (a
  // round whose quorum is complete closes). The payload's bytes. A refusal is
  // an error naming its reason.
  result<std::size_t> send(int s, int p, std::span<const float> local, std::uint64_t tokens);
  // Closes fragment p's open round if it holds a delta: the clock passes its
  // deadline. Whether a round closed.
  result<bool> close_late(int p);
  // Site s takes fragment p's newest version into `local`: the held outer
  // update when it is one version behind, else the parameters (fp32), as a
  // GlobalPull answers. The payload's bytes (0: already current).
  result<std::size_t> pull(int s, int p, std::span<float> local);

  std::vector<float> theta() const { return agg_->rounds().optimizer().full_params(); }  // a copy
  std::uint64_t version(int p) const { return agg_->rounds().optimizer().version(p); }
  const diloco::site_rounds& site(int s) const { return sites_[std::size_t(s)]; }
  const diloco::fragment_plan& plan() const { return agg_->rounds().optimizer().plan(); }
  const aggregator::aggregation& aggregation() const { return *agg_; }

 private:
  diloco_cloud(std::unique_ptr<aggregator::aggregation> agg, std::vector<diloco::site_rounds> sites)
      : agg_(std::move(agg)), sites_(std::move(sites)) {}
  static std::string name(int s) { return "site-" + std::to_string(s); }

  std::unique_ptr<aggregator::aggregation> agg_;
  std::vector<diloco::site_rounds> sites_;
  aggregator::nanos now_{0};
  std::vector<std::byte> payload_;
  std::vector<float> values_;
};

}  // namespace loom::sim
