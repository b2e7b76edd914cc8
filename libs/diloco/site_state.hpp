// site_state: the edge side of DiLoCo for one site (one trainer or trainer
// group). Holds the anchor θ_a, a copy of the last global parameters the site
// applied, with each fragment's version; computes the pseudo-gradient
// Δ_p = θ_a[p] − θ_local[p] that the site sends, and applies the global
// parameters (or the outer update) the aggregator publishes for a fragment.
//
// Merge rule on receipt (see README.md, "Applying a global fragment"):
//   keep_progress (default): θ_local[p] = θ_new + (θ_local[p] − θ_ref), where
//     θ_ref = θ_local[p] as it was when its delta was sent (the global already
//     holds that progress), or θ_a[p] when no delta is in flight (the global
//     holds none of it). With no inner step in between (τ = 0) this is plain
//     DiLoCo's θ_local[p] = θ_new, bit for bit.
//   replace: θ_local[p] = θ_new (plain DiLoCo; drops the τ overlapped steps).
//   mix:     θ_local[p] = α·θ_local[p] + (1 − α)·θ_new (Streaming DiLoCo's mixing).
// Then θ_a[p] = θ_new. Memory: the anchor (one model) plus, per fragment with
// a delta in flight, its local values at sending (model/P each).
// Owned by the training thread; not thread-safe.
#pragma once

#include "libs/diloco/fragment_plan.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace loom::diloco {

enum class merge_rule { keep_progress, replace, mix };

struct site_options {
  merge_rule rule = merge_rule::keep_progress;
  float mix_alpha = 0.5f;  // α of `mix`: the local share
};

// keep_progress over fragment p: local[p] = global_p + (local[p] − ref_p),
// element by element in the plan's range order (global_p and ref_p gathered,
// size plan.size(p)). The one expression of the rule: site_state's merge and
// the trainer's sync (which keeps θ_sent apart from the anchor) both call it.
// REQUIRES: sizes as stated.
void keep_progress(const fragment_plan& plan, int p, std::span<const float> global_p, std::span<const float> ref_p,
                   std::span<float> local);

class site_state {
 public:
  // A site joining (or returning) at the global parameters `global` (the full
  // vector) whose fragments are at `versions`. invalid_argument on a size
  // mismatch or an α outside [0, 1].
  static result<site_state> make(fragment_plan plan, std::span<const float> global,
                                 std::vector<std::uint64_t> versions, site_options opts = {});

  // delta_out = θ_a[p] − local[p] (size plan().size(p)), and remembers local[p]
  // as the point of sending. invalid_argument on a bad fragment or sizes.
  status pseudo_gradient(int p, std::span<const float> local, std::span<float> delta_out);

  // The aggregator's global values of fragment p (gathered, size(p)) at
  // `version`: merged into local (the full vector) by the rule above.
  // conflict if version <= version(p) (already applied or older).
  status apply_global(int p, std::uint64_t version, std::span<const float> global_p, std::span<float> local);
  // The outer update U of fragment p (θ_new = θ_a[p] − U), which must be the
  // next version: conflict unless version == version(p) + 1.
  status apply_update(int p, std::uint64_t version, std::span<const float> update_p, std::span<float> local);

  const fragment_plan& plan() const { return plan_; }
  std::uint64_t version(int p) const { return versions_[p]; }
  const std::vector<std::uint64_t>& versions() const { return versions_; }
  bool in_flight(int p) const { return !sent_[p].empty(); }
  std::span<const float> anchor() const { return anchor_; }

 private:
  site_state(fragment_plan plan, std::vector<float> anchor, std::vector<std::uint64_t> versions, site_options opts);
  status check(int p, std::size_t part, std::size_t full) const;
  void merge(int p, std::span<const float> global_p, std::span<float> local);

  fragment_plan plan_;
  site_options opts_;
  std::vector<float> anchor_;
  std::vector<std::uint64_t> versions_;
  std::vector<std::vector<float>> sent_;  // per fragment: local values when its delta left; empty = none in flight
  std::vector<float> ref_, global_;       // scratch: a fragment's anchor, its new global values
};

}  // namespace loom::diloco
