#include "libs/vision/dedup.hpp"

namespace loom::vision {

embedding_index::verdict embedding_index::add(std::span<const float> e) {
  if (dim_ == 0) dim_ = e.size();
  verdict v;
  const std::size_t n = kept();
  for (std::size_t i = 0; i < n; ++i) {
    const float* r = rows_.data() + i * dim_;
    float dot = 0.0f;
    for (std::size_t d = 0; d < dim_; ++d) dot += r[d] * e[d];
    if (i == 0 || dot > v.cosine) v.cosine = dot, v.of = i;
  }
  if (n > 0 && v.cosine >= threshold_) {
    v.duplicate = true;
    return v;
  }
  v.of = n;
  rows_.insert(rows_.end(), e.begin(), e.end());
  return v;
}

}  // namespace loom::vision
