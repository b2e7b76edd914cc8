// outer_optimizer: the cloud side of DiLoCo for one job. Holds the one copy of
// the global parameters θ and the outer momentum m (server memory O(model),
// not O(sites)) and, per fragment, one accumulator into which the sites'
// pseudo-gradients Δ_s are summed as they arrive (no per-site buffers):
//
//   accumulate(p, w_s, Δ_s):  A_p += w_s·Δ_s,  W_p += w_s
//   step(p):                  g = A_p / W_p
//                             m = μ·m + g
//                             U = η·(g + μ·m)      (Nesterov; η·m without it)
//                             θ_p -= U,  version_p += 1,  A_p = 0, W_p = 0
//
// Defaults η = 0.7, μ = 0.9 (DiLoCo, OpenDiLoCo); plain_average() (η = 1,
// μ = 0) makes θ the weighted average of the sites' parameters (FedAvg).
// Memory: θ_p and m_p are kept per fragment, gathered (the plan's range
// order), and a fragment may be unloaded (its owner keeps them on disk and
// loads them back before the fragment's next step), so what is held can be
// bounded by the fragments in use rather than the model. A_p exists from the
// fragment's first delta to its step only.
// Owned by one actor (the aggregator's job); not thread-safe.
#pragma once

#include "libs/diloco/fragment_plan.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace loom::diloco {

// Where A_p is summed. fp64 (default): 8 bytes per parameter, as fast as fp32
// here (memory-bound), and the sum of a round's deltas rounds to the same fp32
// bits whatever their arrival order except on rare near-ties (README.md,
// "Determinism"); fp32: 4 bytes, order-dependent in the last bits.
enum class accumulate_in { fp64, fp32 };

struct outer_options {
  float lr = 0.7f;        // η
  float momentum = 0.9f;  // μ; 0 = no momentum buffer at all
  bool nesterov = true;
  accumulate_in precision = accumulate_in::fp64;

  // η = 1, μ = 0: θ becomes the weighted average of the sites' parameters.
  static outer_options plain_average() { return {1.0f, 0.0f, false, accumulate_in::fp64}; }
  // invalid_argument unless 0 < lr (finite) and 0 <= momentum < 1.
  status validate() const;
};

// The index of the first NaN or ±Inf in v, or nullopt when all are finite.
std::optional<std::size_t> first_non_finite(std::span<const float> v);

struct step_report {
  std::uint64_t version = 0;  // the fragment's version after the step
  double weight = 0;          // W_p the step divided by
  int deltas = 0;             // how many accumulate() calls it averaged
};

class outer_optimizer {
 public:
  // A fresh job: θ = params, m = 0, every fragment at version 0.
  // invalid_argument if params.size() != plan.total() or the options are bad.
  static result<outer_optimizer> make(fragment_plan plan, std::vector<float> params, outer_options opts);
  // A job resumed from its saved state (full_params(), full_momentum(),
  // versions()). momentum is empty iff opts.momentum == 0.
  static result<outer_optimizer> restore(fragment_plan plan, std::vector<float> params, std::vector<float> momentum,
                                         std::vector<std::uint64_t> versions, outer_options opts);
  // A job resumed with no fragment loaded: each is load()ed before its step.
  static result<outer_optimizer> unloaded(fragment_plan plan, std::vector<std::uint64_t> versions,
                                          outer_options opts);

  // Fragment p's θ_p and m_p (gathered; m_p empty iff μ = 0) as the owner
  // kept them. invalid_argument (nothing changed) for a bad p or sizes.
  status load(int p, std::vector<float> theta, std::vector<float> momentum);
  // θ_p and m_p moved out (the owner may reuse the buffers); what was
  // accumulated for p stays. REQUIRES: p valid.
  std::pair<std::vector<float>, std::vector<float>> unload(int p);
  bool loaded(int p) const { return slabs_[std::size_t(p)].loaded; }
  int loaded_count() const;

  // A_p += weight·delta. invalid_argument (nothing added) for a fragment out of
  // range, delta.size() != plan().size(p), or weight not finite and > 0.
  // REQUIRES: delta finite (the caller rejects NaN/Inf: first_non_finite).
  status accumulate(int p, double weight, std::span<const float> delta);
  // Applies the outer step to fragment p (formulas above). update_out, when
  // not empty, receives U (size plan().size(p)): what the downlink sends.
  // conflict if nothing was accumulated for p since its last step or p is
  // not loaded. A_p is zeroed as it is read and kept as the spare: the next
  // fragment's first delta takes it (no new pages to fault in), so sums
  // exist for the fragments with deltas pending, plus one.
  result<step_report> step(int p, std::span<float> update_out = {});
  // Forgets what was accumulated for p since its last step.
  void discard(int p);
  // θ_p += add (gathered, size plan().size(p)). With a lossy downlink the
  // sites apply only the decoded update U', not U: the caller gives back
  // U − U' so that θ stays exactly what the sites hold, and its error
  // feedback sends the difference in a later round (bidirectional
  // compression, as DoubleSqueeze: the server applies what it sends). Without
  // it the sites' deltas, taken from θ − (U − U'), would count again what θ
  // already moved: momentum then amplifies it (top-k diverged, diloco_bench).
  // invalid_argument (nothing changed) for a bad fragment, a size mismatch or
  // a non-finite value; conflict when p is not loaded.
  status correct(int p, std::span<const float> add);

  const fragment_plan& plan() const { return plan_; }
  const outer_options& options() const { return opts_; }
  // θ_p and m_p, gathered (empty while p is not loaded; m_p also when μ = 0).
  std::span<const float> params(int p) const { return slabs_[std::size_t(p)].theta; }
  std::span<const float> momentum(int p) const { return slabs_[std::size_t(p)].m; }
  // The whole θ (m) in the model's layout: a copy. REQUIRES: every fragment loaded.
  std::vector<float> full_params() const;
  std::vector<float> full_momentum() const;  // empty when μ = 0
  const std::vector<std::uint64_t>& versions() const { return versions_; }
  std::uint64_t version(int p) const { return versions_[p]; }
  double pending_weight(int p) const { return acc_[p].weight; }
  int pending_deltas(int p) const { return acc_[p].deltas; }

 private:
  struct accumulator {
    std::vector<double> f64;  // one of the two, sized plan.size(p) on first use
    std::vector<float> f32;
    double weight = 0;
    int deltas = 0;
  };
  struct slab {
    std::vector<float> theta, m;  // gathered θ_p, m_p (m empty when μ = 0)
    bool loaded = false;
  };
  outer_optimizer(fragment_plan plan, std::vector<std::uint64_t> versions, outer_options opts);
  std::vector<float> full(std::vector<float> slab::*part) const;

  fragment_plan plan_;
  outer_options opts_;
  std::vector<slab> slabs_;  // per fragment
  accumulator spare_;        // zeroed storage of the last step's A_p
  std::vector<std::uint64_t> versions_;
  std::vector<accumulator> acc_;
};

}  // namespace loom::diloco
