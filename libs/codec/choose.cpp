#include "libs/codec/choose.hpp"

#include <cmath>
#include <limits>

namespace loom::codec {

codec_choice choose_codec(double bandwidth_bytes_per_s, std::uint64_t params, double seconds_budget,
                          const options& o) {
  const double bw = std::isfinite(bandwidth_bytes_per_s) && bandwidth_bytes_per_s > 0 ? bandwidth_bytes_per_s : 0;
  const double budget = std::isfinite(seconds_budget) && seconds_budget > 0 ? seconds_budget : 0;
  static constexpr codec_id ladder[] = {codec_id::fp16, codec_id::int8, codec_id::int4, codec_id::topk};
  codec_choice c;
  for (codec_id id : ladder) {
    c.codec = id;
    c.bytes = encoded_bytes(id, params, o);
    c.seconds = bw > 0 ? static_cast<double>(c.bytes) / bw : std::numeric_limits<double>::infinity();
    c.fits = c.seconds <= budget;
    if (c.fits) return c;
  }
  return c;  // topk, the smallest, even though it does not fit
}

}  // namespace loom::codec
