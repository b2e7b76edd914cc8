#include "libs/textq/policy.hpp"

#include <cstdio>

namespace loom::textq {
namespace {

std::string fmt(const char* f, double a, double b) {
  char buf[96];
  std::snprintf(buf, sizeof buf, f, a, b);
  return buf;
}

}  // namespace

learned_verdict judge(const filter_model& m, const filter_policy& p, const text_scores& s) {
  if (p.perplexity) {
    const ppl_bucket b = m.bucket_of(s.perplexity);
    const bool keep = b == ppl_bucket::head ? p.keep_head : b == ppl_bucket::middle ? p.keep_middle : p.keep_tail;
    if (!keep) {
      static constexpr std::string_view rules[] = {"ppl_bucket_head", "ppl_bucket_middle", "ppl_bucket_tail"};
      const double cut = b == ppl_bucket::head ? m.head_max : m.middle_max;
      return {rules[int(b)], fmt(b == ppl_bucket::head ? "perplexity %.3f <= %.3f (head)"
                                 : b == ppl_bucket::middle ? "perplexity %.3f <= %.3f (middle)"
                                                          : "perplexity %.3f > %.3f (tail)",
                                 s.perplexity, b == ppl_bucket::tail ? m.middle_max : cut)};
    }
  }
  if (p.quality && m.has_quality_head) {
    const float t = p.quality_threshold >= 0 ? p.quality_threshold : m.quality_threshold;
    if (s.quality < t) return {"quality_classifier", fmt("P(good) %.3f < %.3f", s.quality, t)};
  }
  return {};
}

result<learned_filter> learned_filter::create(std::shared_ptr<const filter_model> m, filter_policy p,
                                              std::shared_ptr<semantic_index> index, scorer_options opt) {
  auto s = scorer::create(std::move(m), opt);
  if (!s) return s.err();
  return learned_filter(std::move(*s), p, std::move(index));
}

learned_verdict learned_filter::check(std::string_view text) {
  last_ = scorer_.score(text);
  auto v = judge(scorer_.model(), policy_, last_);
  if (!v.keep() || !policy_.semantic_dedup || !index_) return v;
  if (auto hit = index_->check_and_add(last_.embedding))
    return {"semantic_duplicate", fmt("cosine %.3f to kept #%.0f", hit->cosine, double(hit->kept))};
  return v;
}

}  // namespace loom::textq
