// error_feedback: the residual of one compressed stream of deltas (a site's
// uplink for one fragment, or the cloud's downlink for one fragment). What a
// lossy codec drops in one round is added back before the next, so nothing is
// lost for good, only delayed:  e += delta; q = encode(e); e -= decode(q).
// Owns its residual (n floats). Not thread-safe: one owner (the fragment's
// actor or the trainer's sync thread) calls it.
#pragma once

#include "libs/codec/codec.hpp"

#include <span>
#include <utility>
#include <vector>

namespace loom::codec {

class error_feedback {
 public:
  // A zero residual for deltas of n values.
  explicit error_feedback(std::size_t n, codec_id c = codec_id::int8, options o = {});

  // e += delta; q = encode(e); e -= decode(q); q goes into `payload`.
  // invalid_argument (residual untouched) for a delta of the wrong length or a
  // non-finite value (its index named); for bad options or a value the format
  // cannot hold (residual restored up to rounding).
  status encode_into(std::span<const float> delta, std::vector<std::byte>& payload);
  result<std::vector<std::byte>> encode(std::span<const float> delta);

  // The codec of later rounds. The residual carries over: a link that moves
  // from int8 to topk still delivers what int8 left behind.
  void set_codec(codec_id c) { codec_ = c; }
  codec_id codec() const { return codec_; }
  const options& opts() const { return opts_; }

  std::size_t size() const { return e_.size(); }
  std::span<const float> residual() const { return e_; }
  double residual_norm() const;  // L2
  // Drops what was not yet sent (after a resync from a global snapshot).
  void reset();
  // The residual as residual() gave it (a job reloaded from its saved state).
  // invalid_argument (unchanged) for another length or a non-finite value.
  status restore(std::span<const float> residual);
  // The residual moved out (the stream then has 0 values), and a residual of
  // any length moved in: its owner keeps it elsewhere meanwhile (the
  // aggregator's fragments out of memory). adopt: invalid_argument
  // (unchanged) for a non-finite value.
  std::vector<float> release() { return std::exchange(e_, {}); }
  status adopt(std::vector<float> residual);

 private:
  codec_id codec_;
  options opts_;
  std::vector<float> e_;
};

}  // namespace loom::codec
