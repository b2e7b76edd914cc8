// choose_codec: which codec a link can afford for one sync of a fragment,
// from the link's measured bandwidth (LinkMonitor) and a time budget (how long
// a sync may take to stay hidden behind the next inner steps). Pure function.
#pragma once

#include "libs/codec/codec.hpp"

#include <cstdint>

namespace loom::codec {

// The codec a job gets when it neither fixes one nor has a bandwidth estimate.
inline constexpr codec_id default_codec = codec_id::int8;

struct codec_choice {
  codec_id codec = default_codec;
  std::uint64_t bytes = 0;  // encoded_bytes(codec, params, o)
  double seconds = 0;       // bytes / bandwidth (+inf for a dead link)
  bool fits = false;        // seconds <= the budget
};

// The least lossy of fp16 -> int8 -> int4 -> topk whose payload for `params`
// values moves in `seconds_budget` at `bandwidth_bytes_per_s`
// (encoded_bytes <= bandwidth * budget). When none fits, topk with fits=false:
// the smallest payload is still the best a weak link can do. A non-finite or
// negative bandwidth or budget counts as 0. fp32 is never chosen: fp16 halves
// it and is lossless in practice for pseudo-gradients (OpenDiLoCo).
// REQUIRES: check_options(o).ok().
codec_choice choose_codec(double bandwidth_bytes_per_s, std::uint64_t params, double seconds_budget,
                          const options& o = {});

}  // namespace loom::codec
