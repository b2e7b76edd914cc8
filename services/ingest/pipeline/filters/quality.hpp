// Document quality rules in the manner of Gopher (Rae et al. 2021: word counts,
// word length, symbols, bullets, ellipses, alphabetic words, stop words,
// repeated lines and paragraphs) and C4 (Raffel et al. 2020: lorem ipsum, curly
// brackets, and line filters for "javascript", policy boilerplate, short or
// unpunctuated lines). Every threshold is configurable; every rejection names
// its rule. A quality_checker keeps scratch buffers: one per thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::ingest {

struct quality_rules {
  std::size_t min_chars = 0;  // "min_chars": shorter texts rejected (0 = off)

  bool gopher = true;  // the word/line statistics below
  std::size_t min_words = 50;          // "gopher_min_words" (words with a letter or digit)
  std::size_t max_words = 100000;      // "gopher_max_words"
  double min_mean_word_length = 3;     // "gopher_mean_word_length" (code points)
  double max_mean_word_length = 10;
  double max_symbol_word_ratio = 0.1;  // "gopher_symbol_ratio": ('#' + "..." + "…") per word
  double max_bullet_lines = 0.9;       // "gopher_bullet_lines": fraction of lines starting with a bullet
  double max_ellipsis_lines = 0.3;     // "gopher_ellipsis_lines": fraction of lines ending with "..."/"…"
  double min_alpha_words = 0.8;        // "gopher_alpha_words": fraction of words with a letter
  std::size_t min_stop_words = 2;      // "gopher_stop_words": the, be, to, of, and, that, have, with

  bool repetition = true;                   // Gopher repetition rules
  double max_dup_lines = 0.3;               // "gopher_dup_lines": repeated lines / lines
  double max_dup_line_chars = 0.2;          // "gopher_dup_line_chars": their characters / all
  double max_dup_paragraphs = 0.3;          // "gopher_dup_paragraphs"
  double max_dup_paragraph_chars = 0.2;     // "gopher_dup_paragraph_chars"

  bool c4_lorem_ipsum = true;          // "c4_lorem_ipsum": placeholder text
  bool c4_curly_bracket = false;       // "c4_curly_bracket": any '{' (code, templates) rejects
  std::size_t c4_min_sentences = 0;    // "c4_min_sentences" (0 = off)
  // C4 line filters: the lines are removed (counted per rule), the rest is kept.
  bool c4_drop_javascript_lines = false;  // "c4_javascript": lines mentioning javascript
  bool c4_drop_policy_lines = false;      // "c4_policy": terms of use, privacy/cookie policy
  bool c4_drop_unpunctuated_lines = false;  // "c4_no_terminal_punct": no . ! ? " ' at the end
  std::size_t c4_min_words_per_line = 0;  // "c4_short_line" (0 = off)
};

struct quality_verdict {
  bool pass = true;
  std::string_view rule;  // the first failing rule (static string); empty on pass
  std::string detail;     // e.g. "12 words < 50"
  std::vector<std::pair<std::string_view, std::uint32_t>> lines_removed;  // per C4 line filter
};

class quality_checker {
 public:
  explicit quality_checker(quality_rules rules = {}) : rules_(std::move(rules)) {}
  // Applies the C4 line filters to `text` (which may shrink), then the document rules.
  quality_verdict check(std::string& text);
  const quality_rules& rules() const { return rules_; }

 private:
  quality_verdict filter_lines(std::string& text);

  quality_rules rules_;
  std::vector<std::pair<std::uint64_t, std::uint32_t>> lines_, paragraphs_;  // (hash, chars)
  std::string kept_;
};

}  // namespace loom::ingest
