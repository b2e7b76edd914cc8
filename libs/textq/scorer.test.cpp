// The scorer on awkward input (empty, one byte, invalid UTF-8, NULs, longer
// than max_bytes), its agreement between batch and single scoring, and the
// verdict strings the importer will see.
#include <cmath>
#include <string>

#include <doctest/doctest.h>

#include "libs/textq/fixture.test.hpp"
#include "libs/textq/policy.hpp"
#include "libs/textq/scorer.hpp"

using namespace loom::textq;

namespace {

void check_sane(const text_scores& s, std::size_t C) {
  CHECK(std::isfinite(s.perplexity));
  CHECK(s.perplexity >= 1.0);
  CHECK(s.quality >= 0.0f);
  CHECK(s.quality <= 1.0f);
  REQUIRE(s.embedding.size() == C);
  double n = 0;
  for (float e : s.embedding) n += double(e) * e;
  CHECK((n == doctest::Approx(1.0).epsilon(1e-4) || n == 0.0));
}

}  // namespace

TEST_CASE("empty, one-byte, non-UTF-8 and NUL-laden texts score to finite values") {
  auto sc = scorer::create(fixture::shared_model());
  REQUIRE(sc.ok());
  const std::size_t C = std::size_t(fixture::shared_model()->config.channels);
  const auto empty = sc->score("");
  CHECK(empty.bytes == 0);
  CHECK(empty.tokens == 1);  // the end boundary after the start
  check_sane(empty, C);
  check_sane(sc->score("a"), C);
  const std::string junk("\xff\xfe\xc3\x28\xa0\xa1\x00\x00\xe2\x82", 10);
  const auto j = sc->score(junk);
  CHECK(j.bytes == junk.size());
  check_sane(j, C);
  // Random bytes are far less likely under an English model than English is.
  CHECK(j.perplexity > 2 * sc->score(testing::clean_prose(4242, 100)).perplexity);
}

TEST_CASE("a text longer than max_bytes is scored on its prefix and says so") {
  auto sc = scorer::create(fixture::shared_model(), {8, 1000});
  REQUIRE(sc.ok());
  const std::string t = testing::clean_prose(77, 600);
  REQUIRE(t.size() > 1000);
  const auto s = sc->score(t);
  CHECK(s.truncated);
  CHECK(s.bytes == 1000);
  CHECK(s.perplexity == sc->score(t.substr(0, 1000)).perplexity);
}

TEST_CASE("scoring in a batch gives each text what scoring it alone gives") {
  auto sc = scorer::create(fixture::shared_model());
  REQUIRE(sc.ok());
  std::vector<std::string> texts;
  for (int i = 0; i < 5; ++i) texts.push_back(testing::clean_prose(std::uint64_t(300 + i), 60 + 90 * std::size_t(i)));
  texts.push_back("");
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<text_scores> batch(texts.size());
  sc->score_batch(views, batch);
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const auto one = sc->score(texts[i]);
    // Other rows of a batch change the sgemm's blocking, not the maths: equal to rounding.
    CHECK(batch[i].perplexity == doctest::Approx(one.perplexity).epsilon(1e-4));
    CHECK(batch[i].quality == doctest::Approx(one.quality).epsilon(1e-3));
  }
}

TEST_CASE("judge names the rule that rejected a document, as ingest's verdicts do") {
  const auto& m = *fixture::shared_model();
  text_scores s;
  s.quality = 0.9f;
  s.perplexity = m.middle_max * 1.5;
  filter_policy p;
  auto v = judge(m, p, s);
  CHECK(v.rule == "ppl_bucket_tail");
  CHECK(v.detail.find("tail") != std::string::npos);
  s.perplexity = m.head_max * 0.9;
  CHECK(judge(m, p, s).keep());
  p.keep_head = false;  // a profile that keeps only the middle
  CHECK(judge(m, p, s).rule == "ppl_bucket_head");
  p.keep_head = true;
  s.quality = 0.1f;
  CHECK(judge(m, p, s).rule == "quality_classifier");
  p.quality = false;
  CHECK(judge(m, p, s).keep());
}

TEST_CASE("a learned filter rejects a semantic duplicate of a document it kept") {
  auto index = std::make_shared<semantic_index>(std::size_t(fixture::shared_model()->config.channels), 0.9f);
  filter_policy p;
  p.perplexity = false;  // only dedup here
  p.quality = false;
  auto f = learned_filter::create(fixture::shared_model(), p, index);
  REQUIRE(f.ok());
  const std::string doc = testing::clean_prose(5150, 150);
  CHECK(f->check(doc).keep());
  const auto again = f->check(doc);
  CHECK(again.rule == "semantic_duplicate");
  CHECK(f->check(testing::clean_prose(5151, 150)).keep());
  CHECK(index->size() == 2);
}
