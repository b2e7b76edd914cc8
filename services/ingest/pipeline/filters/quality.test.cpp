#include "services/ingest/pipeline/filters/profile.hpp"
#include "services/ingest/pipeline/filters/quality.hpp"
#include "services/ingest/pipeline/test_support.hpp"

#include <doctest/doctest.h>

#include <filesystem>

using namespace loom::ingest;
using namespace loom::ingest::testing;

namespace {

// The Debian licence texts: real, clean prose (symlinks skipped: same texts).
std::vector<std::pair<std::string, std::string>> prose_texts() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::directory_iterator(licences_dir))
    if (!e.is_symlink() && e.is_regular_file())
      out.emplace_back(e.path().filename().string(), read_all(e.path().string()));
  std::sort(out.begin(), out.end());
  return out;
}

quality_verdict check(std::string text, const quality_rules& rules = {}) {
  quality_checker q(rules);
  return q.check(text);
}

std::string repeat(const std::string& s, int n) {
  std::string r;
  for (int i = 0; i < n; ++i) r += s;
  return r;
}

// ~60 words of plain English that passes every default rule.
const std::string sentence =
    "The committee met on Tuesday to review the plan, and the members agreed that the budget should cover "
    "repairs to the old bridge before winter. ";
std::string clean_prose(int paragraphs = 3) {
  std::string s;
  for (int i = 0; i < paragraphs; ++i)
    s += sentence + "Paragraph " + std::to_string(i) + " adds its own remark about schedules with care.\n\n";
  return s;
}

}  // namespace

TEST_CASE("clean prose from /usr/share/common-licenses passes every default rule and the C4 document rules") {
  auto texts = prose_texts();
  REQUIRE(texts.size() >= 10);
  quality_rules c4;
  c4.gopher = c4.repetition = false;
  c4.c4_curly_bracket = true;
  c4.c4_min_sentences = 3;
  for (const auto& [name, text] : texts) {
    INFO(name);
    auto v = check(text);
    CHECK_MESSAGE(v.pass, v.rule << ": " << v.detail);
    auto w = check(text, c4);
    CHECK_MESSAGE(w.pass, w.rule << ": " << w.detail);
  }
  CHECK(check(clean_prose()).pass);
}

TEST_CASE("each quality rule is triggered by a document made to break it") {
  struct target {
    std::string rule, text;
    quality_rules rules;
  };
  quality_rules lax_lines;
  lax_lines.max_dup_lines = lax_lines.max_dup_line_chars = 1.0;
  quality_rules small_max;
  small_max.max_words = 40;
  quality_rules web = profile_by_name("web").value().quality;
  quality_rules min_chars;
  min_chars.gopher = min_chars.repetition = false;
  min_chars.min_chars = 100;

  std::vector<target> targets = {
      {"gopher_min_words", "Too short, with the words of a title.", {}},
      {"gopher_max_words", clean_prose(), small_max},
      {"gopher_mean_word_length", repeat("the cat and the dog of a man to be at it on us by me. ", 8), {}},
      {"gopher_mean_word_length", repeat("the incomprehensibilities and internationalisation of counterrevolutionaries. ", 12), {}},
      {"gopher_symbol_ratio", clean_prose() + repeat("#tag #more #hashtags ... ", 20), {}},
      {"gopher_bullet_lines", "Intro line of the list with care.\n" + repeat("\u2022 the item of a list that has words\n", 12), {}},
      {"gopher_ellipsis_lines", repeat("and the long story of the old town went on and on...\n", 6) + "It ended with the mayor.\n", lax_lines},
      {"gopher_alpha_words", sentence + repeat("1234 5678 9012 3456 7890 ", 20), {}},
      {"gopher_stop_words", repeat("Quick brown foxes jump over lazy dogs near quiet rivers every morning. ", 8), {}},
      {"gopher_dup_lines", sentence + "\n" + repeat("Click here to subscribe to our newsletter today and win.\n", 10), {}},
      {"gopher_dup_paragraphs", sentence + "\n\n" + repeat("Same paragraph, the first line of it.\nAnd the second line of that.\n\n", 6), lax_lines},
      {"c4_lorem_ipsum", clean_prose() + "Lorem ipsum dolor sit amet, consectetur adipiscing elit.", {}},
      {"c4_curly_bracket", clean_prose() + "function f() { return 1; } is a tiny function.", web},
      {"c4_min_sentences", repeat("the word and the other word of that list with more words ", 10) + "end.", web},
      {"c4_no_lines_left", "javascript only\nprivacy policy\n", web},
      {"min_chars", "tiny", min_chars},
  };
  for (const auto& t : targets) {
    INFO(t.rule << " <- " << t.text.substr(0, 80));
    auto v = check(t.text, t.rules);
    CHECK_FALSE(v.pass);
    CHECK(v.rule == t.rule);
    CHECK_FALSE(v.detail.empty());
  }
}

TEST_CASE("C4 line filters drop javascript, policy, short and unpunctuated lines and count them") {
  quality_rules web = profile_by_name("web").value().quality;
  std::string text = clean_prose(2);
  std::string doc = "Please enable JavaScript to view this page.\n" + text + "Read our Privacy Policy here.\nShare\n" +
                    "A line without an end mark but enough words\n";
  quality_checker q(web);
  auto v = q.check(doc);
  CHECK(v.pass);
  CHECK(doc.find("JavaScript") == std::string::npos);
  CHECK(doc.find("Privacy") == std::string::npos);
  CHECK(doc.find("Share") == std::string::npos);
  CHECK(doc.find("without an end mark") == std::string::npos);
  CHECK(doc.find("The committee met") != std::string::npos);
  std::map<std::string, std::uint32_t> removed;
  for (auto [rule, n] : v.lines_removed) removed[std::string(rule)] = n;
  CHECK(removed == std::map<std::string, std::uint32_t>{
                       {"c4_javascript", 1}, {"c4_policy", 1}, {"c4_short_line", 1}, {"c4_no_terminal_punct", 1}});
}

TEST_CASE("profiles resolve by name and an unknown name is an error listing the known ones") {
  for (const auto& n : profile_names()) CHECK(profile_by_name(n).ok());
  CHECK(profile_by_name("code").value().clean.keep_indentation);
  CHECK_FALSE(profile_by_name("code").value().quality.gopher);
  auto bad = profile_by_name("nope");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == loom::errc::invalid_argument);
  CHECK(bad.err().message.find("web") != std::string::npos);
  // The code profile keeps source code that the prose rules would reject.
  std::string code = "int main() {\n  for (int i = 0; i < 10; ++i) {}\n  return 0;\n}\n";
  CHECK_FALSE(check(code).pass);
  CHECK(check(code, profile_by_name("code").value().quality).pass);
}
