#include "services/trainer/check/compliance.hpp"
#include "services/trainer/check/model_check.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace loom::modelcheck;

namespace {
std::string report(bool pii, int quarantined) {
  return std::string(R"({"format":"loom-ingest-report","pii":{"enabled":)") + (pii ? "true" : "false") +
         R"(,"items_redacted":7},"licences":{"policy":"deny","deny":["GPL-*"],"quarantined":)" +
         std::to_string(quarantined) + "}}";
}
}  // namespace

TEST_CASE("a dataset imported with PII redaction on and nothing quarantined is compliant") {
  compliance_finding f;
  assess_import_report(report(true, 0), "news", f);
  CHECK(f.problems.empty());
  REQUIRE(f.notes.size() == 1);
  CHECK(f.notes[0] == "dataset news: no licence quarantined, PII redacted (7 items)");
}

TEST_CASE("quarantined licences and PII left unredacted are each a compliance problem naming the dataset") {
  compliance_finding f;
  assess_import_report(report(false, 3), "web", f);
  REQUIRE(f.problems.size() == 2);
  CHECK(f.problems[0] == "dataset web: its import quarantined 3 document(s) under denied licences (GPL-*)");
  CHECK(f.problems[1] == "dataset web was imported with PII redaction off (--no-pii): PII in it is unredacted");
  compliance_finding g;
  assess_import_report("not json", "x", g);
  CHECK(g.problems.size() == 1);
}

TEST_CASE("a raw text file in the lineage is not assessed and a dataset without a report is a problem") {
  auto f = assess_lineage({"text:/srv/corpus.txt", "text:/srv/corpus.txt", "dataset:nosuch"}, "/nonexistent-data/datasets");
  REQUIRE(f.not_assessed.size() == 1);  // the repeated entry counts once
  CHECK(f.not_assessed[0].starts_with("text:/srv/corpus.txt (a raw file"));
  REQUIRE(f.problems.size() == 1);
  CHECK(f.problems[0].starts_with("dataset nosuch: no import report at /nonexistent-data/datasets/nosuch/report.json"));
}

TEST_CASE("the loss threshold is the tighter of the template's and the option's, else ln(vocab)") {
  CHECK(loss_threshold(0, std::nullopt, 50257) == doctest::Approx(std::log(50257.0)));
  CHECK(loss_threshold(6.0, std::nullopt, 50257) == 6.0);
  CHECK(loss_threshold(6.0, 7.0, 50257) == 6.0);
  CHECK(loss_threshold(6.0, 5.0, 50257) == 5.0);
  CHECK(loss_threshold(0, 9.0, 50257) == 9.0);
}
