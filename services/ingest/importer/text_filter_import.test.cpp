// The learned text filter inside an import (issue 33): a model trained as
// `loom data train-filter --kind text` trains it, then an import with
// text_filter set drops what the rules let through (spam, boilerplate, MT-like
// noise) by the learned rule, keeps clean prose, and refuses a damaged model
// by its file name before anything is published. Needs the GPT-2 vocabulary.
#include "libs/files/temp_dir.hpp"
#include "libs/textq/filter_model.hpp"
#include "libs/textq/testing.hpp"
#include "libs/textq/train.hpp"
#include "services/ingest/importer/importer.hpp"
#include "services/ingest/importer/testing.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom;
using namespace loom::ingest;
using ingest::importer_testing::slurp;
using ingest::importer_testing::write_file;
namespace tt = loom::textq::testing;

TEST_CASE("a learned text filter drops by its rule what the quality rules keep, and a damaged model stops the import") {
  files::temp_dir t("loom-text-filter");
  std::vector<std::string> ref;
  for (int i = 0; i < 120; ++i) ref.push_back(tt::clean_prose(50'000 + i, 150));
  std::vector<std::string_view> ref_view(ref.begin(), ref.end());
  const auto lab = tt::labelled_set(60'000'000, 80, 20);
  std::vector<textq::labelled_text> lab_view;
  for (const auto& l : lab) lab_view.push_back({l.text, l.good()});
  textq::train_options to;
  to.steps = 200;
  auto model = textq::train_filter(to, ref_view, lab_view);
  REQUIRE_MESSAGE(model.ok(), model.err().to_string());
  const std::string model_path = t.path() + "/filter.gpt";
  REQUIRE(textq::save(*model, model_path).ok());

  const std::string in = t.path() + "/in";
  for (int i = 0; i < 6; ++i) write_file(in + "/clean" + std::to_string(i) + ".txt", tt::clean_prose(70'000 + i, 160));
  for (int i = 0; i < 3; ++i) {
    write_file(in + "/spam" + std::to_string(i) + ".txt", tt::spam(80'000 + i, 160));
    write_file(in + "/boiler" + std::to_string(i) + ".txt", tt::boilerplate(81'000 + i, 160));
    write_file(in + "/noise" + std::to_string(i) + ".txt", tt::mt_noise(82'000 + i, 160));
  }
  import_options o;
  o.source = in;
  o.datasets_root = t.path() + "/datasets";
  o.dataset = "plain";
  o.memory_budget = 64u << 20;
  auto rules_only = import_dataset(o);
  REQUIRE_MESSAGE(rules_only.ok(), rules_only.err().to_string());

  o.dataset = "learned";
  o.text_filter = model_path;
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  MESSAGE("rules alone kept " << rules_only->kept << " of 15; with the learned filter " << s->kept);
  std::uint64_t learned = 0;
  for (const auto& [rule, n] : s->pipeline.rejected_by_rule) {
    MESSAGE(rule << " " << n);
    if (rule.starts_with("ppl_bucket_") || rule == "quality_classifier" || rule == "semantic_duplicate") learned += n;
  }
  CHECK(rules_only->kept >= 10);      // the rules miss most of the bad kinds
  CHECK(s->kept >= 5);                // clean prose stays (one of six may fall in a bucket)
  CHECK(s->kept <= 7);                // and at most one bad document gets through
  CHECK(learned == rules_only->kept - s->kept);

  std::string bytes = slurp(model_path);
  bytes[bytes.size() / 3] ^= 0x21;
  write_file(model_path, bytes);
  o.dataset = "learned2";
  auto bad = import_dataset(o);
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.err().message.find(model_path) != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(t.path() + "/datasets/learned2"));
}
