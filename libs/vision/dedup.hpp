// Semantic near-duplicate detection over image embeddings (filter.hpp's
// embed()): each new embedding is compared with every one kept so far;
// cosine >= threshold marks it a duplicate of the most similar, otherwise it
// is kept. A linear scan (a few microseconds per 1000 kept at 256-d): the
// index is meant per shard or per import batch, not for millions.
// One owner thread; not synchronised.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace loom::vision {

// Measured in dedup.test.cpp (README): resized and re-encoded copies score
// >= 0.97 against their original, distinct generated scenes <= ~0.75.
inline constexpr float dedup_threshold = 0.90f;

class embedding_index {
 public:
  explicit embedding_index(float threshold = dedup_threshold) : threshold_(threshold) {}

  struct verdict {
    bool duplicate = false;
    std::size_t of = 0;     // duplicate: the kept entry it matches; else its own new id
    float cosine = 0.0f;    // the best similarity found (0 for the first)
  };
  // REQUIRES: e L2-normalised, the same length for every call.
  verdict add(std::span<const float> e);

  std::size_t kept() const { return dim_ ? rows_.size() / dim_ : 0; }

 private:
  float threshold_;
  std::size_t dim_ = 0;
  std::vector<float> rows_;  // kept embeddings, (kept, dim)
};

}  // namespace loom::vision
