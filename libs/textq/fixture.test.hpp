// The trained filter every textq test shares (tests only): a GPT over 240
// clean reference documents and a quality head over a labelled set of 320,
// made once per test process (~10 s on 2 cores). Seeds are disjoint from the
// held-out sets the tests score.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "libs/files/test_cache.hpp"
#include "libs/textq/filter_model.hpp"
#include "libs/textq/testing.hpp"
#include "libs/textq/train.hpp"

namespace loom::textq::fixture {

inline constexpr std::uint64_t reference_seed = 10'000;
inline constexpr std::uint64_t train_seed = 20'000'000;
inline constexpr std::uint64_t heldout_seed = 90'000'000;

inline train_options test_options() {
  train_options o;  // the defaults, as shipped
  return o;
}

struct trained {
  std::vector<std::string> reference;
  std::vector<testing::labelled> labelled;
  filter_model model;
  train_report report;
};

inline const trained& shared() {
  static const trained t = [] {
    trained r;
    for (int i = 0; i < 240; ++i) r.reference.push_back(testing::clean_prose(reference_seed + std::uint64_t(i), 150));
    r.labelled = testing::labelled_set(train_seed, 160, 40);
    // Made by an earlier process of this very binary: the same bytes training would give.
    const std::string cached = files::testing::test_cache_path("textq-fixture");
    if (auto m = load(cached); m.ok()) {
      r.model = std::move(*m);
      MESSAGE("trained model loaded from " << cached);
      return r;
    }
    std::vector<std::string_view> ref(r.reference.begin(), r.reference.end());
    std::vector<labelled_text> lab;
    for (const auto& l : r.labelled) lab.push_back({l.text, l.good()});
    auto m = train_filter(test_options(), ref, lab, &r.report);
    if (!m.ok()) FAIL(m.err().to_string());
    r.model = std::move(*m);
    (void)save(r.model, cached);  // best effort: the next process trains again when it failed
    MESSAGE("trained: loss " << r.report.first_loss << " -> " << r.report.final_loss << " in " << r.report.seconds_gpt
                             << " s; head " << r.report.seconds_head << " s; held-out ppl median "
                             << r.report.holdout_ppl_median << "; buckets head<=" << r.model.head_max
                             << " middle<=" << r.model.middle_max);
    return r;
  }();
  return t;
}

inline std::shared_ptr<const filter_model> shared_model() {
  static const auto p = std::make_shared<const filter_model>(shared().model);
  return p;
}

}  // namespace loom::textq::fixture
