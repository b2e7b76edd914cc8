// limits: what one aggregation may ask of this process (issue 24 item 9) and
// how far one delta may move the model (item 4), each with its reason. Pure
// functions over plain values; any thread.
//
//   start   values        ≤ the largest model template's (templates/pretrain-d12.toml,
//                           GPT-2 124M: 124,475,904): no template trains a bigger one,
//                           and an aggregation holds ~24 B a value (θ, momentum and
//                           downlink residual in fp32, the fp64 accumulator, scratch):
//                           3 GB at that size. flat_size 1e8 once took 4.7 GB, 2^40 bad_alloc.
//           live          ≤ 32 aggregations (live or being made) and their values
//                           together ≤ 4 × the largest (≈ 12 GB): a cloud runs a few
//                           diloco stages at once; retirement frees them at the job's end.
//           fragments     ≤ 256 (the run spec's own bound on diloco.fragments)
//   delta   tokens        ≤ spec.max_delta_tokens (steps × batch × seq_len × grad_accum)
//           norm          ‖Δ_p‖ ≤ c·‖θ_p‖ + ε·√n_p per fragment, c = 4, ε = 4: below.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace loom::aggregator {

struct start_limits {
  std::uint64_t max_values = 0;        // one aggregation: the largest model template's (default_limits)
  std::size_t max_live = 32;           // aggregations held, live or being made
  std::uint64_t max_total_values = 0;  // over every aggregation held: 4 × max_values
  int max_fragments = 256;             // diloco.fragments' bound in the run spec
};
// The limits above, max_values from libs/model's GPT-2 124M (the d12 templates' shape).
start_limits default_limits();

// resource_exhausted naming the limit and its value, or ok. `values` is the
// new aggregation's; `live`/`live_values` what is held already.
status check_start(std::uint64_t values, int fragments, std::size_t live, std::uint64_t live_values,
                   const start_limits& l);

// The norm bound on a delta of one fragment. A delta is how far H inner AdamW
// steps moved the fragment: AdamW moves each value by about lr a step (the
// templates: lr ≤ 6e-4, H ≤ 100, so ≤ 0.06 a value in a round) and weight
// decay shrinks θ by at most its own norm. c = 4 leaves room for a fragment
// trained far (a long H, a large lr) and ε = 4 for one whose θ is near zero
// (biases, a fresh flat vector: the synthetic tests move 1-2 a value per
// round). How much of the bound honest deltas use is in the status
// (AggregationStatus.max_delta_bound_use; tests/diloco_job.test.cpp prints
// it). What this refuses is a corrupt or hostile delta (1e20, a blown-up copy
// of θ), not a merely unusual one. Both norms in fp64.
struct norm_bound {
  double c = 4.0;
  double eps = 4.0;  // per value, RMS: ε·√n
};
// The largest ‖Δ‖ accepted for a fragment of n values whose θ has norm theta_norm.
double max_delta_norm(double theta_norm, std::size_t n, const norm_bound& b = {});
// ‖v‖ in fp64 (NaN or ±Inf when a value is; callers leave those to the non_finite check).
double l2_norm(std::span<const float> v);

}  // namespace loom::aggregator
