// sample: text generation from a trained model — temperature and top-k
// sampling over the real vocabulary (padding columns never drawn), a sliding
// context window of the model's seq_len. Deterministic for a seed: the random
// draws come from a 64-bit generator we own, not from a standard-library
// distribution whose algorithm may change.
// Stateless; the model is driven by the caller's thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/engine/model.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace loom::trainer {

// splitmix64: a small, well-mixed generator whose sequence we control (the
// sampler and GRPO's per-row draws).
struct rng64 {
  std::uint64_t s;
  std::uint64_t next() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }
};


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
