// downlink: the cloud's side of the update it publishes for each fragment.
// After an outer step the aggregator sends U (the step's update) to every site
// through a lossy codec; error feedback keeps what the codec dropped for the
// next round, and θ takes back what was not sent, so the global parameters
// stay what the sites hold (bidirectional compression, as DoubleSqueeze):
//
//   e_p += U;  q = enc(e_p);  U' = dec(q);  e_p −= U'
//   correction = U − U'       (the caller adds it to θ_p: outer_optimizer::correct)
//
// A value the codec cannot hold goes exactly (fp32) that round. The residual
// e is state: residual() is what a job saves, restore() takes it back, so a
// restarted aggregator sends the same bytes it would have sent. The one
// implementation: the aggregator (services/aggregator/aggregation.cpp) and
// the simulators (sim/diloco) both call it. One owner; not thread-safe.
#pragma once

#include "libs/codec/codec.hpp"
#include "libs/codec/error_feedback.hpp"
#include "libs/diloco/fragment_plan.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <span>
#include <vector>

namespace loom::diloco {

class downlink {
 public:
  // A zero residual for every fragment of plan, sent with codec c. Without
  // feedback the residual is dropped before each round: the codec alone (an
  // ablation: what error feedback is worth, diloco_bench).
  downlink(const fragment_plan& plan, codec::codec_id c, bool feedback = true);
  // The residuals as residual() gave them (every fragment's, in fragment
  // order). corruption when their count is not the plan's total.
  static result<downlink> restore(const fragment_plan& plan, codec::codec_id c, std::span<const float> residual);
  // No fragment loaded: each is load()ed before its first send.
  static downlink unloaded(const fragment_plan& plan, codec::codec_id c, bool feedback = true);

  // Encodes fragment p's update U into payload (formulas above) and writes
  // U − U' into correction (size plan.size(p)). Returns the codec used: the
  // job's, or fp32 for a round whose values it cannot hold. invalid_argument
  // (nothing changed) for a bad fragment, sizes, or a non-finite U.
  result<codec::codec_id> send(int p, std::span<const float> update, std::vector<std::byte>& payload,
                               std::span<float> correction);

  codec::codec_id codec() const { return codec_; }
  // e_p (empty while p is not loaded).
  std::span<const float> residual(int p) const { return ef_[std::size_t(p)].residual(); }
  std::vector<float> residual() const;  // every fragment's, in fragment order; REQUIRES: all loaded

  // e_p moved out (its owner keeps it on disk, and may reuse the buffer);
  // send(p) refuses until load(p).
  std::vector<float> unload(int p);
  // e_p as residual(p) gave it, moved in. invalid_argument (unchanged) for a
  // bad p, size or a non-finite value.
  status load(int p, std::vector<float> residual);
  bool loaded(int p) const { return ef_[std::size_t(p)].size() == sizes_[std::size_t(p)]; }

 private:
  downlink(codec::codec_id c, bool feedback) : codec_(c), feedback_(feedback) {}

  codec::codec_id codec_;
  bool feedback_ = true;
  std::vector<codec::error_feedback> ef_;  // per fragment
  std::vector<std::size_t> sizes_;         // per fragment: its values
  std::vector<float> sent_;                // scratch: U'
};

}  // namespace loom::diloco
