#include "services/ingest/pipeline/pipeline.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>

#include <nlohmann/json.hpp>
#include <set>

using namespace loom::ingest;
using namespace loom::ingest::testing;
using loom::files::temp_dir;

TEST_CASE("a document is cleaned, judged and counted, and the verdict names the rule") {
  pipeline p;
  document good;
  good.source = "a.txt";
  good.text = "  " + licence_text("BSD") + "\r\n\r\n\r\n";
  auto r = p.process(good);
  CHECK(r.v.kind == outcome::keep);
  CHECK(good.text.back() != '\n');  // cleaned in place
  CHECK(r.licences.licences.front().id == "BSD-3-Clause");

  document short_doc;
  short_doc.source = "b.txt";
  short_doc.line = 3;
  short_doc.text = "Too short.";
  r = p.process(short_doc);
  CHECK(r.v.kind == outcome::reject);
  CHECK(r.v.rule == "gopher_min_words");

  document blank;
  blank.text = " \t\n\x01 ";
  CHECK(p.process(blank).v.rule == "empty");

  const auto& rep = p.report();
  CHECK(rep.documents == 3);
  CHECK(rep.kept == 1);
  CHECK(rep.rejected == 2);
  CHECK(rep.rejected_by_rule.at("gopher_min_words") == 1);
  REQUIRE(rep.problems.size() == 2);
  CHECK(rep.problems[0].file == "b.txt");
  CHECK(rep.problems[0].line == 3);
}

TEST_CASE("hook stages plug in after cleaning and after the checks, and their verdicts are counted") {
  pipeline p;
  int seen_after_checks = 0;
  // A stand-in for PII redaction: runs on clean text, before the quality rules.
  p.add_stage(hook_point::after_clean, "pii", [](document& d) {
    for_each_field(d, [](std::string& s) {
      for (std::size_t i = s.find("SECRET"); i != std::string::npos; i = s.find("SECRET", i + 8)) s.replace(i, 6, "<SECRET>");
    });
    return verdict::keep();
  });
  // A stand-in for exact dedup: only documents that passed every check reach it.
  std::set<std::string> index;
  p.add_stage(hook_point::after_checks, "dedup", [&](document& d) {
    ++seen_after_checks;
    return index.insert(d.text).second ? verdict::keep() : verdict::reject("", "exact duplicate");
  });
  const std::string base = licence_text("BSD");
  for (const std::string& text : {base + "\nSECRET", base + "\nSECRET", std::string("tiny")}) {
    document d;
    d.text = text;
    auto r = p.process(d);
    if (r.v.kind == outcome::keep) CHECK(d.text.find("<SECRET>") != std::string::npos);
  }
  CHECK(seen_after_checks == 2);  // "tiny" was rejected before dedup
  CHECK(p.report().kept == 1);
  CHECK(p.report().rejected_by_rule.at("dedup") == 1);
  CHECK(p.report().rejected_by_rule.at("gopher_min_words") == 1);
}

TEST_CASE("the import report is JSON with every counter, and worker reports merge") {
  temp_dir t("loom-ingest-rep");
  write_file(t.path() + "/a.txt", licence_text("MPL-2.0"));
  write_file(t.path() + "/b.txt", "Lorem ipsum dolor sit amet.");
  write_file(t.path() + "/c.bin", "x");
  pipeline_options o;
  o.prof = profile_by_name("web").value();
  pipeline p(o);
  std::vector<std::string> kept;
  import_sinks sinks;
  sinks.kept = [&](document& d, const document_result&) {
    kept.push_back(d.source);
    return true;
  };
  auto st = run_import(t.path(), {}, p, sinks);
  CHECK(st.files == 3);
  auto j = nlohmann::json::parse(p.report().to_json());
  CHECK(j["files"] == 3);
  CHECK(j["documents"]["read"] == 2);
  CHECK(j["documents"]["kept"] == 1);
  CHECK(j["reader_rejections"]["unknown_format"] == 1);
  CHECK(j["licences"]["MPL-2.0"] == 1);
  CHECK(j["bytes_decoded"].get<std::uint64_t>() > 10000);
  CHECK(j.contains("cleaning"));
  CHECK(j.contains("lines_removed_by_rule"));
  CHECK(j["problems"].size() == 2);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0].find("a.txt") != std::string::npos);

  import_report total;
  total.merge(p.report());
  total.merge(p.report());
  CHECK(total.kept == 2);
  CHECK(total.reader_rejections.at("unknown_format") == 2);
  CHECK(total.problems.size() == 4);
}
