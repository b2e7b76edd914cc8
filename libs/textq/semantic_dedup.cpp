#include "libs/textq/semantic_dedup.hpp"

namespace loom::textq {

std::optional<semantic_index::match> semantic_index::scan(std::span<const float> e) const {
  std::optional<match> best;
  const std::size_t n = rows_.size() / dim_;
  for (std::size_t i = 0; i < n; ++i) {
    const float* r = rows_.data() + i * dim_;
    // Eight running sums: a fixed order the compiler may keep in one vector
    // register (a single float sum may not be reordered, so would not vectorise).
    float acc[8] = {};
    std::size_t c = 0;
    for (; c + 8 <= dim_; c += 8)
      for (int k = 0; k < 8; ++k) acc[k] += r[c + k] * e[c + k];
    float dot = 0;
    for (; c < dim_; ++c) dot += r[c] * e[c];
    for (float a : acc) dot += a;
    if (dot >= threshold_ && (!best || dot > best->cosine)) best = match{i, dot};
  }
  return best;
}

std::optional<semantic_index::match> semantic_index::check_and_add(std::span<const float> e) {
  std::lock_guard lock(mu_);
  if (e.size() != dim_) return std::nullopt;
  auto m = scan(e);
  if (!m) rows_.insert(rows_.end(), e.begin(), e.end());
  return m;
}

std::optional<semantic_index::match> semantic_index::nearest(std::span<const float> e) const {
  std::lock_guard lock(mu_);
  if (e.size() != dim_) return std::nullopt;
  return scan(e);
}

std::size_t semantic_index::size() const {
  std::lock_guard lock(mu_);
  return rows_.size() / dim_;
}

}  // namespace loom::textq
