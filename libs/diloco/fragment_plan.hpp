// fragment_plan: how a model's one contiguous fp32 parameter vector is split
// into P fragments for Streaming DiLoCo, and when each fragment syncs. A
// fragment is a list of [offset, offset + count) ranges of the full vector; its
// values, gathered in range order, are what travels (a delta, an update).
// P = 1 is plain DiLoCo: one fragment, the whole vector, every H inner steps.
// Immutable after make; safe to share read-only across threads.
#pragma once

#include "libs/model/gpt_config.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace loom::diloco {

struct range {
  std::size_t offset = 0;
  std::size_t count = 0;
};

class fragment_plan {
 public:
  // Streaming DiLoCo over GPT-2's layout (libs/model): transformer layer i goes
  // to fragment i mod P (strided, as the paper does: neighbouring layers sync
  // at different times); wte's and wpe's rows are split into P contiguous row
  // blocks, block p to fragment p, so each fragment carries about model/P
  // values; the final LayerNorm (lnfw, lnfb) goes with the last layer, to
  // fragment (L-1) mod P. invalid_argument unless cfg is valid,
  // 1 <= fragments <= layers and sync_every >= fragments.
  static result<fragment_plan> for_gpt2(const model::gpt2_config& cfg, int fragments, std::uint64_t sync_every);

  // P contiguous, near-equal pieces of a flat vector of `total` values (the
  // first total % P pieces one value longer): tests, benches, other models.
  // invalid_argument unless 1 <= fragments <= total and sync_every >= fragments.
  static result<fragment_plan> flat(std::size_t total, int fragments, std::uint64_t sync_every);

  int fragments() const { return static_cast<int>(frags_.size()); }
  std::uint64_t sync_every() const { return h_; }  // H: inner steps between two syncs of a fragment
  std::size_t total() const { return total_; }
  const std::vector<range>& ranges(int p) const { return frags_[p].ranges; }
  std::size_t size(int p) const { return frags_[p].size; }  // values in fragment p
  std::size_t max_size() const;                            // the peak payload, in values

  // The schedule. t counts inner steps taken (t >= 1). Fragment p syncs after
  // every step t with t mod H == phase(p) = p*H/P; phases are distinct because
  // H >= P, so at most one fragment is due after any step.
  std::uint64_t phase(int p) const;
  // The fragment due after step t, or -1 (none; always -1 for t = 0).
  int due_after(std::uint64_t t) const;
  // The step after which fragment p syncs for the k-th time (k = 0, 1, ...):
  // phase(p) + k*H, except fragment 0, whose first sync is after step H.
  std::uint64_t sync_step(int p, std::uint64_t k) const;

  // Copies fragment p out of / into the full vector, in range order.
  // REQUIRES: full.size() == total(), part.size() == size(p).
  void gather(int p, std::span<const float> full, std::span<float> part) const;
  void scatter(int p, std::span<const float> part, std::span<float> full) const;

 private:
  struct fragment {
    std::vector<range> ranges;
    std::size_t size = 0;
  };
  fragment_plan(std::vector<fragment> frags, std::size_t total, std::uint64_t h)
      : frags_(std::move(frags)), total_(total), h_(h) {}

  std::vector<fragment> frags_;
  std::size_t total_ = 0;
  std::uint64_t h_ = 1;
};

}  // namespace loom::diloco
