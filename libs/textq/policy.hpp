// What the importer calls: a filter_policy (a profile's choice of buckets,
// quality threshold and semantic dedup) turned into ingest-style verdicts.
// judge() is a pure function of scores. learned_filter bundles a scorer (one
// per thread) with a semantic_index that several learned_filters may share.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "libs/status/status.hpp"
#include "libs/textq/filter_model.hpp"
#include "libs/textq/scorer.hpp"
#include "libs/textq/semantic_dedup.hpp"

namespace loom::textq {

struct filter_policy {
  bool perplexity = true;
  bool keep_head = true, keep_middle = true, keep_tail = false;  // CCNet: a profile keeps some buckets
  bool quality = true;                // needs a model trained with labels
  float quality_threshold = -1;       // < 0: the model's own
  bool semantic_dedup = true;
  // Measured (semantic_dedup.test.cpp, README): of 1,770 pairs of distinct
  // documents none reach 0.9 (2 reach 0.85, 9 reach 0.8); of paraphrases that
  // MinHash misses entirely, 30% reach 0.9 and 60% 0.8. Dropping a distinct
  // document loses data for good, so the default errs towards keeping.
  float dedup_cosine = 0.9f;
};

// rule empty = keep; else ingest's verdict::reject(rule, detail) with rule one of
// "ppl_bucket_head" / "ppl_bucket_middle" / "ppl_bucket_tail", "quality_classifier",
// "semantic_duplicate".
struct learned_verdict {
  std::string_view rule;
  std::string detail;  // "perplexity 7.93 > 5.10 (tail)", "P(good) 0.12 < 0.50", "cosine 0.97 to kept #12"
  bool keep() const { return rule.empty(); }
};

// Perplexity bucket, then the quality head (no dedup: that needs the index).
learned_verdict judge(const filter_model& m, const filter_policy& p, const text_scores& s);

class learned_filter {
 public:
  // `index` may be null (no semantic dedup) or shared with other filters.
  static result<learned_filter> create(std::shared_ptr<const filter_model> m, filter_policy p,
                                       std::shared_ptr<semantic_index> index = nullptr, scorer_options opt = {});
  // Scores `text`; judge(); then, if still kept and dedup is on, the index
  // (a kept document enters it). Call from the thread that owns this filter.
  learned_verdict check(std::string_view text);
  const text_scores& last_scores() const { return last_; }

 private:
  learned_filter(scorer s, filter_policy p, std::shared_ptr<semantic_index> i)
      : scorer_(std::move(s)), policy_(p), index_(std::move(i)) {}
  scorer scorer_;
  filter_policy policy_;
  std::shared_ptr<semantic_index> index_;
  text_scores last_;
};

}  // namespace loom::textq
