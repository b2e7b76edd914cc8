// The importer end to end on a small mixed corpus: what is kept, what is
// dropped and why, what the shards hold, and how versions replace each other.
// Needs the GPT-2 vocabulary (scripts/install-vocab), as the tokenizer tests do.
#include "libs/files/temp_dir.hpp"
#include "libs/shards/dataset.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "services/ingest/importer/importer.hpp"
#include "services/ingest/importer/testing.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

using namespace loom;
using namespace loom::ingest;
using ingest::importer_testing::prose;
using ingest::importer_testing::slurp;
using ingest::importer_testing::write_file;
namespace fs = std::filesystem;

namespace {

std::string replace_all(std::string s, std::string_view from, std::string_view to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

// The corpus, and the text each kept document must decode to.
struct corpus {
  std::string dir;
  std::set<std::string> expected;  // cleaned + redacted texts of the kept documents
};

corpus write_corpus(const std::string& dir) {
  corpus c;
  c.dir = dir;
  const std::string p1 = prose(1, 300), p2 = prose(2, 250), p3 = prose(3, 200), p4 = prose(4, 220),
                    p5 = prose(5, 260);
  // PII inside prose: redacted to typed placeholders before anything else sees it.
  const std::string pii_line = "Write to jane.doe@example.com or ping 203.0.113.7 from the village.";
  const std::string a = p1.substr(0, p1.find("\n\n")) + "\n\n" + pii_line + "\n\n" + p1.substr(p1.find("\n\n") + 2);
  write_file(dir + "/a.txt", a);
  c.expected.insert(replace_all(replace_all(a, "jane.doe@example.com", "<EMAIL>"), "203.0.113.7", "<IPV4>"));
  write_file(dir + "/b.md", p2);
  c.expected.insert(p2);
  const std::string sft =
      R"({"messages": [{"role": "user", "content": "How wide is the river?"}, {"role": "assistant", "content": "About forty metres at the old bridge."}]})";
  const std::string pref = R"({"prompt": "Name a season.", "chosen": "Winter.", "rejected": "Blue."})";
  const std::string bad_sft =
      R"({"messages": [{"role": "narrator", "content": "Once."}, {"role": "assistant", "content": "Yes."}]})";
  write_file(dir + "/c.jsonl", nlohmann::json({{"text", p3}}).dump() + "\n" +                   // 1 kept
                                   nlohmann::json({{"text", p4}}).dump() + "\n" +               // 2 kept
                                   nlohmann::json({{"text", replace_all(p3, " ", "  ")}}).dump() +  // 3 exact dup of 1
                                   "\n" + sft + "\n" + pref + "\n" + bad_sft + "\n");           // 4, 5 kept; 6 bad role
  c.expected.insert(p3);
  c.expected.insert(p4);
  c.expected.insert("### User:\nHow wide is the river?\n\n### Assistant:\nAbout forty metres at the old bridge.\n\n");
  c.expected.insert("### User:\nName a season.\n\n### Assistant:\nWinter.\n\n");
  write_file(dir + "/d.txt.gz", ingest::testing::gzip(p5));
  c.expected.insert(p5);
  const std::string gz = ingest::testing::gzip(prose(6, 300));
  write_file(dir + "/e.txt.gz", gz.substr(0, gz.size() / 2));  // truncated
  std::string latin1;
  for (int i = 0; i < 60; ++i) latin1 += "Caf\xe9 na\xefve r\xe9sum\xe9 the d\xe9j\xe0 vu of a gar\xe7on.\n";
  write_file(dir + "/f.txt", latin1);
  std::string near = p1;  // a.txt without the PII paragraph and with two words changed
  near.replace(near.find(' '), 1, " bridge ");
  near.replace(near.rfind(' '), 1, " quiet ");
  write_file(dir + "/g.txt", near);
  write_file(dir + "/h.txt", p2);  // exact copy of b.md
  write_file(dir + "/i/COPYING", ingest::testing::licence_text("GPL-3"));
  write_file(dir + "/short.txt", "Too short to be a document.");
  return c;
}

import_options options_for(const std::string& source, const std::string& root, const std::string& name) {
  import_options o;
  o.source = source;
  o.datasets_root = root;
  o.dataset = name;
  o.licences.action = licence_policy::mode::deny;
  o.licences.deny = {"GPL-*"};
  o.memory_budget = 64u << 20;
  return o;
}

std::vector<nlohmann::json> jsonl(const std::string& path) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// (file suffix, rule) of every rejects.jsonl line.
std::set<std::pair<std::string, std::string>> rejects_of(const std::string& dir) {
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& j : jsonl(dir + "/rejects.jsonl")) {
    const std::string file = j["file"];
    out.insert({file.substr(file.rfind('/') + 1), j["rule"]});
  }
  return out;
}

std::vector<std::string> staging_leftovers(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(root + "/.staging"))
    if (e.path().extension() != ".lock") out.push_back(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("a mixed corpus becomes a dataset: kept documents in shards, the rest in rejects.jsonl with file and rule") {
  files::temp_dir t("loom-importer");
  const corpus c = write_corpus(t.path() + "/in");
  auto o = options_for(c.dir, t.path() + "/datasets", "mixed");
  o.nodes = {"edge-a", "edge-b", "edge-c"};
  o.shard_target_bytes = 4096;  // several shards to place
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  MESSAGE(summary_text(*s));
  const std::string dir = t.path() + "/datasets/mixed";
  CHECK(s->dir == dir);

  CHECK(s->kept == c.expected.size());
  CHECK(s->dedup.exact == 2);
  CHECK(s->dedup.near == 1);
  CHECK(s->quarantined == 1);
  CHECK(s->records == 2);
  CHECK(s->pii[static_cast<std::size_t>(pii::pii_type::email)] == 1);
  CHECK(s->pii[static_cast<std::size_t>(pii::pii_type::ipv4)] == 1);

  // The shards: accepted by the reader (structure + SHA-256), placed, decoding to the texts.
  auto ds = shards::dataset::open(dir, shards::verify::eager);
  REQUIRE_MESSAGE(ds.ok(), ds.err().to_string());
  CHECK(ds->info().shards.size() >= 2);
  CHECK(ds->token_count() == s->tokens);
  for (const auto& sh : ds->info().shards)
    CHECK((sh.node == "edge-a" || sh.node == "edge-b" || sh.node == "edge-c"));
  auto bpe = tokenizer::bpe::load_gpt2();
  REQUIRE(bpe.ok());
  std::multiset<std::string> decoded;
  std::vector<std::uint32_t> buf(1 << 16);
  for (std::size_t i = 0; i < ds->info().shards.size(); ++i) {
    auto sh = ds->shard(i);
    REQUIRE(sh.ok());
    for (std::uint64_t k = 0; k < (*sh)->doc_count(); ++k) {
      auto ids = (*sh)->document(k, buf);
      REQUIRE(ids.ok());
      REQUIRE(!ids->empty());
      CHECK((*ids)[0] == 50256u);  // <|endoftext|> opens every document
      decoded.insert(bpe->decode(ids->subspan(1)));
    }
  }
  CHECK(decoded == std::multiset<std::string>(c.expected.begin(), c.expected.end()));

  // Every dropped item, by file and rule.
  const auto r = rejects_of(dir);
  const std::set<std::pair<std::string, std::string>> want = {
      {"e.txt.gz", "truncated_compression"}, {"f.txt", "invalid_utf8"},       {"short.txt", "gopher_min_words"},
      {"c.jsonl", "annotation_bad_role"},    {"COPYING", "licence_denied"},   {"c.jsonl", "duplicate_exact"},
      {"g.txt", "duplicate_near"},           {"h.txt", "duplicate_exact"}};
  for (const auto& w : want) CHECK_MESSAGE(r.count(w) == 1, w.first << " " << w.second);
  CHECK(r.size() == want.size());
  for (const auto& j : jsonl(dir + "/rejects.jsonl")) {
    if (j["rule"] == "duplicate_exact" && std::string(j["file"]).ends_with("c.jsonl")) {
      CHECK(j["line"] == 3);
      CHECK(std::string(j["detail"]).find("c.jsonl record 0") != std::string::npos);
    }
    if (j["rule"] == "annotation_bad_role") CHECK(j["line"] == 6);
  }

  // records.jsonl: the two valid annotation records, in the trainer's format.
  const auto recs = jsonl(dir + "/records.jsonl");
  REQUIRE(recs.size() == 2);
  CHECK(recs[0]["messages"][1]["content"] == "About forty metres at the old bridge.");
  CHECK(recs[1]["chosen"] == "Winter.");

  // report.json: the pipeline report plus PII, dedup, licence, annotation and output figures.
  auto rep = nlohmann::json::parse(slurp(dir + "/report.json"));
  CHECK(rep["pii"]["by_type"]["email"] == 1);
  CHECK(rep["dedup"]["exact_duplicates"] == 2);
  CHECK(rep["dedup"]["near_duplicates"] == 1);
  CHECK(rep["licences"]["quarantined"] == 1);
  CHECK(rep["annotations"]["pass_rate"].get<double>() == doctest::Approx(2.0 / 3.0));
  CHECK(rep["output"]["tokens"] == s->tokens);
  CHECK(rep["performance"]["peak_rss_bytes"].get<std::uint64_t>() > 0);
  CHECK(rep["pipeline"]["documents"]["read"] == s->documents);
  CHECK(staging_leftovers(t.path() + "/datasets").empty());
}

TEST_CASE("with dedup off every copy is kept, and the licence report policy keeps the GPL text") {
  files::temp_dir t("loom-importer");
  const corpus c = write_corpus(t.path() + "/in");
  auto o = options_for(c.dir, t.path() + "/datasets", "all");
  o.dedup = false;
  o.licences = {};
  auto s = import_dataset(o);
  REQUIRE_MESSAGE(s.ok(), s.err().to_string());
  CHECK(s->kept == c.expected.size() + 3 + 1);  // three copies and COPYING
  CHECK(s->dedup.exact + s->dedup.near == 0);
  CHECK(s->quarantined == 0);
  auto rep = nlohmann::json::parse(slurp(t.path() + "/datasets/all/report.json"));
  CHECK(rep["licences"]["documents_by_licence"]["GPL-3.0"] == 1);
}

TEST_CASE("a re-import replaces the dataset whole and leaves nothing behind in staging") {
  files::temp_dir t("loom-importer");
  const std::string root = t.path() + "/datasets";
  write_file(t.path() + "/v1/a.txt", prose(10, 300));
  write_file(t.path() + "/v1/b.txt", prose(11, 300));
  write_file(t.path() + "/v2/c.txt", prose(12, 300));
  auto first = import_dataset(options_for(t.path() + "/v1", root, "books"));
  REQUIRE(first.ok());
  CHECK(first->kept == 2);
  auto second = import_dataset(options_for(t.path() + "/v2", root, "books"));
  REQUIRE(second.ok());
  CHECK(second->kept == 1);
  CHECK(first->import_id != second->import_id);
  auto m = shards::read_manifest(root + "/books");
  REQUIRE(m.ok());
  CHECK(m->total_tokens() == second->tokens);
  auto rep = nlohmann::json::parse(slurp(root + "/books/report.json"));
  CHECK(rep["import_id"] == second->import_id);
  CHECK(!fs::exists(root + "/books/records.jsonl"));
  CHECK(staging_leftovers(root).empty());
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(root)) names.insert(e.path().filename().string());
  CHECK(names == std::set<std::string>{".staging", "books"});
}

TEST_CASE("the stop flag aborts in either pass and the previous version stays as it was") {
  files::temp_dir t("loom-importer");
  const std::string root = t.path() + "/datasets";
  for (int i = 0; i < 40; ++i) write_file(t.path() + "/v1/" + std::to_string(100 + i) + ".txt", prose(100 + i, 200));
  for (int i = 0; i < 40; ++i) write_file(t.path() + "/v2/" + std::to_string(200 + i) + ".txt", prose(200 + i, 200));
  auto first = import_dataset(options_for(t.path() + "/v1", root, "news"));
  REQUIRE(first.ok());
  const std::string manifest_before = slurp(root + "/news/manifest.json");
  const std::string report_before = slurp(root + "/news/report.json");

  for (const char* phase : {"read", "write", "publish"}) {
    CAPTURE(phase);
    std::atomic<bool> stop{false};
    auto o = options_for(t.path() + "/v2", root, "news");
    o.stop = &stop;
    o.progress_interval_ms = 0;
    std::uint64_t calls = 0;
    o.progress = [&](const import_progress& p) {
      if (p.phase == phase) ++calls, stop = true;
    };
    auto s = import_dataset(o);
    REQUIRE(!s.ok());
    CHECK(s.code() == errc::unavailable);
    CHECK(calls >= 1);
    CHECK(slurp(root + "/news/manifest.json") == manifest_before);
    CHECK(slurp(root + "/news/report.json") == report_before);
    CHECK(staging_leftovers(root).empty());
  }
  auto ds = shards::dataset::open(root + "/news");
  CHECK(ds.ok());
}

TEST_CASE("bad dataset names, a missing source, a root inside the source and a second import of the same name are errors") {
  files::temp_dir t("loom-importer");
  write_file(t.path() + "/in/a.txt", prose(1, 100));
  for (const std::string& bad : std::vector<std::string>{"", ".hidden", "a/b", "a b", "caf\xc3\xa9", "..", std::string(65, 'x')}) {
    CAPTURE(bad);
    auto s = import_dataset(options_for(t.path() + "/in", t.path() + "/datasets", bad));
    CHECK(s.code() == errc::invalid_argument);
  }
  CHECK(!fs::exists(t.path() + "/datasets"));
  auto missing = import_dataset(options_for(t.path() + "/nope", t.path() + "/datasets", "x"));
  CHECK(missing.code() == errc::not_found);
  auto inside = import_dataset(options_for(t.path() + "/in", t.path() + "/in/datasets", "x"));
  CHECK(inside.code() == errc::invalid_argument);

  // An import of "busy" in progress holds its lock: a second one is refused.
  auto o = options_for(t.path() + "/in", t.path() + "/datasets", "busy");
  std::optional<result<import_summary>> inner;
  o.progress_interval_ms = 0;
  o.progress = [&](const import_progress&) {
    if (!inner) inner = import_dataset(options_for(t.path() + "/in", t.path() + "/datasets", "busy"));
  };
  auto outer = import_dataset(o);
  CHECK(outer.ok());
  REQUIRE(inner.has_value());
  CHECK(inner->code() == errc::conflict);
}
