// sample: text generation from a trained model — temperature and top-k
// sampling over the real vocabulary (padding columns never drawn), a sliding
// context window of the model's seq_len. Deterministic for a seed: the random
// draws come from a 64-bit generator we own, not from a standard-library
// distribution whose algorithm may change.
// Stateless; the model is driven by the caller's thread.
#pragma once

#include "libs/status/status.hpp"
#include "services/trainer/engine/model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace loom::trainer {

struct sample_options {
  int max_tokens = 64;
  float temperature = 0.8f;  // 0 = greedy (argmax)
  int top_k = 40;            // 0 = the whole vocabulary
  std::uint64_t seed = 1;
  std::uint32_t stop_token = 50256;  // generation ends after it (not included)
};

// Appends up to max_tokens ids after `prompt`. REQUIRES: model.batch() == 1.
// invalid_argument for an empty prompt, an id outside the vocabulary, or
// temperature < 0.
result<std::vector<std::uint32_t>> generate(engine::gpt2& model, std::span<const std::uint32_t> prompt,
                                            const sample_options& o);

// Index drawn from the top-k of logits[0..n) at `temperature` with uniform u in [0,1).
// Exposed for tests.
std::size_t pick(std::span<const float> logits, float temperature, int top_k, double u,
                 std::vector<std::pair<float, std::uint32_t>>& scratch);

}  // namespace loom::trainer
