// byte_text: what the in-process harnesses (local DiLoCo rounds, local
// hyper-parameter search) train on: byte-level tokens (vocab 256) of the
// licence texts every Debian machine ships, read as windows of B × T tokens
// drawn by a seeded generator, so two runs (and two arms of a comparison)
// see the same batches. Owned by the one thread that trains.
#pragma once

#include "libs/status/status.hpp"
#include "libs/engine/train_step.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace loom::sim {

// /usr/share/common-licenses/* in name order (links skipped: GPL -> GPL-3
// once), concatenated: ~230 KB of English legal text. not_found when the
// folder is missing or holds under 100 kB (package base-files).
result<std::string> licence_corpus();

// A stream of training windows over `tokens`: each next() is B rows of T
// consecutive tokens and the T that follow each by one (the targets), at
// offsets drawn from mt19937_64(seed). The spans stay valid until the next call.
// REQUIRES: tokens.size() >= seq_len + 2, and `tokens` outlives the stream.
class window_stream {
 public:
  window_stream(const std::vector<std::int32_t>& tokens, int batch, int seq_len, std::uint64_t seed)
      : tokens_(&tokens), B_(batch), T_(seq_len), rng_(seed), in_(std::size_t(batch) * seq_len), tgt_(in_.size()) {}

  engine::micro_batch next();

 private:
  const std::vector<std::int32_t>* tokens_;
  int B_, T_;
  std::mt19937_64 rng_;
  std::vector<std::int32_t> in_, tgt_;
};

}  // namespace loom::sim
