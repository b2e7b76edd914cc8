// semantic_index: near-duplicate detection by embedding cosine. Documents come
// in stream order; one whose cosine to an earlier kept document is >= the
// threshold is flagged (and not kept), otherwise it is kept and indexed.
// Exact scan: O(kept · C) per document, O(N² · C) for N documents (at C = 64
// and N = 10^5, ~6 M multiply-adds per document, a few ms). Owns the kept
// embeddings (N · C floats). Thread-safe: every call takes the index's lock,
// so workers with one scorer each may share one index.
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

namespace loom::textq {

class semantic_index {
 public:
  // REQUIRES: dim >= 1. Embeddings are L2-normalised (scorer's), so cosine = dot.
  semantic_index(std::size_t dim, float threshold) : dim_(dim), threshold_(threshold) {}

  struct match {
    std::size_t kept = 0;  // position of the earlier kept document among those kept (0-based)
    float cosine = 0;      // the highest cosine found (>= threshold)
  };
  // The closest kept document at cosine >= threshold; when there is none the
  // embedding is kept (and nullopt returned). A zero embedding (empty text, or
  // exactly the centre) matches nothing and is kept.
  std::optional<match> check_and_add(std::span<const float> e);
  // The same lookup without adding anything.
  std::optional<match> nearest(std::span<const float> e) const;

  std::size_t size() const;
  float threshold() const { return threshold_; }

 private:
  std::optional<match> scan(std::span<const float> e) const;  // REQUIRES: mu_ held
  std::size_t dim_;
  float threshold_;
  mutable std::mutex mu_;
  std::vector<float> rows_;  // kept × dim, in keep order
};

}  // namespace loom::textq
