#include "services/aggregator/limits.hpp"

#include "libs/model/gpt_config.hpp"

#include <cmath>

namespace loom::aggregator {

start_limits default_limits() {
  start_limits l;
  l.max_values = model::make_param_layout(model::gpt2_config{}).total;  // GPT-2 124M: pretrain-d12, sft-d12
  l.max_total_values = 4 * l.max_values;
  return l;
}

status check_start(std::uint64_t values, int fragments, std::size_t live, std::uint64_t live_values,
                   const start_limits& l) {
  if (values > l.max_values)
    return make_error(errc::resource_exhausted,
                      "the aggregation has " + std::to_string(values) + " values; the limit is " +
                          std::to_string(l.max_values) + " (the largest model template's, GPT-2 124M)");
  if (fragments > l.max_fragments)
    return make_error(errc::resource_exhausted, "the aggregation has " + std::to_string(fragments) +
                                                    " fragments; the limit is " + std::to_string(l.max_fragments));
  if (live >= l.max_live)
    return make_error(errc::resource_exhausted, "this aggregator holds " + std::to_string(live) +
                                                    " aggregations, its limit (they retire when their jobs end)");
  if (live_values + values > l.max_total_values)
    return make_error(errc::resource_exhausted,
                      "this aggregator holds " + std::to_string(live_values) + " values; " + std::to_string(values) +
                          " more would pass its limit of " + std::to_string(l.max_total_values) +
                          " (4 of the largest model template)");
  return ok_status();
}

double max_delta_norm(double theta_norm, std::size_t n, const norm_bound& b) {
  return b.c * theta_norm + b.eps * std::sqrt(static_cast<double>(n));
}

double l2_norm(std::span<const float> v) {
  double s = 0;
  for (float x : v) s += double(x) * double(x);
  return std::sqrt(s);
}

}  // namespace loom::aggregator
