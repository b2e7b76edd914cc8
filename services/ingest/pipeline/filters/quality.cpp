#include "services/ingest/pipeline/filters/quality.hpp"

#include "services/ingest/pipeline/utf8.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <functional>
#include <unicode/uchar.h>

namespace loom::ingest {
namespace {

bool is_blank_char(char c) { return c == ' ' || c == '\t' || c == '\r'; }

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_blank_char(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank_char(s.back())) s.remove_suffix(1);
  return s;
}

bool is_ascii_punct(unsigned char c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool ci_equal(std::string_view a, std::string_view lower_b) {
  if (a.size() != lower_b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower_b[i]) return false;
  return true;
}

// Case-insensitive search of an ASCII lower-case needle.
bool ci_contains(std::string_view hay, std::string_view needle) {
  if (needle.empty() || hay.size() < needle.size()) return needle.empty();
  const char f = needle[0];
  for (std::size_t i = 0; i + needle.size() <= hay.size(); ++i) {
    if (lower(hay[i]) != f) continue;
    if (ci_equal(hay.substr(i, needle.size()), needle)) return true;
  }
  return false;
}

constexpr std::array<std::string_view, 6> policy_phrases = {"terms of use", "privacy policy", "cookie policy",
                                                            "uses cookies", "use of cookies", "use cookies"};
// Bullets: U+2022 • U+2023 ‣ U+25E6 ◦ U+25AA ▪ U+25AB ▫ U+25A0 ■ U+25A1 □ U+2013 – U+00B7 · U+25CF ● U+25CB ○ U+25BA ► U+25B6 ▶
constexpr std::array<std::string_view, 14> bullets = {
    "\u2022", "\u2023", "\u25E6", "\u25AA", "\u25AB", "\u25A0", "\u25A1",
    "\u2013", "\u00B7", "\u25CF", "\u25CB", "\u25BA", "\u25B6", "\u27A2"};

bool starts_with_bullet(std::string_view t) {
  if (t.empty()) return false;
  if (t[0] == '-' || t[0] == '*' || t[0] == '+') return t.size() == 1 || t[1] == ' ' || t[1] == '\t';
  if (static_cast<unsigned char>(t[0]) < 0xC2) return false;  // every other bullet is non-ASCII
  for (auto b : bullets)
    if (t.substr(0, b.size()) == b) return true;
  return false;
}

bool ends_with(std::string_view s, std::string_view x) {
  return s.size() >= x.size() && s.substr(s.size() - x.size()) == x;
}

std::size_t count_words(std::string_view line) {
  std::size_t n = 0;
  bool in = false;
  for (char c : line) {
    bool sp = c == ' ' || c == '\t';
    if (!sp && !in) ++n;
    in = !sp;
  }
  return n;
}

std::uint64_t mix(std::uint64_t h, std::uint64_t x) {
  h ^= x + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h;
}

// Repeated entries among (hash, chars) pairs: every copy after the first counts.
std::pair<std::size_t, std::size_t> duplicates(std::vector<std::pair<std::uint64_t, std::uint32_t>>& v) {
  std::sort(v.begin(), v.end());
  std::size_t dup = 0, chars = 0;
  for (std::size_t i = 1; i < v.size(); ++i)
    if (v[i].first == v[i - 1].first) {
      ++dup;
      chars += v[i].second;
    }
  return {dup, chars};
}

// Byte classes for the word loop.
enum : std::uint8_t { k_alpha = 1, k_digit = 2, k_punct = 4, k_symbol = 8 };
constexpr std::array<std::uint8_t, 256> byte_class = [] {
  std::array<std::uint8_t, 256> t{};
  for (int c = 0x21; c < 0x7F; ++c)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) t[c] = k_punct;
  for (int c = 'a'; c <= 'z'; ++c) t[c] = k_alpha;
  for (int c = 'A'; c <= 'Z'; ++c) t[c] = k_alpha;
  for (int c = '0'; c <= '9'; ++c) t[c] = k_digit;
  t['#'] |= k_symbol;
  t['.'] |= k_symbol;
  t[0xE2] |= k_symbol;  // lead byte of U+2026 HORIZONTAL ELLIPSIS
  return t;
}();

bool is_stop_word(std::string_view w) {
  if (w.size() < 2 || w.size() > 4) return false;
  switch (lower(w[0])) {
    case 't': return ci_equal(w, "the") || ci_equal(w, "to") || ci_equal(w, "that");
    case 'b': return ci_equal(w, "be");
    case 'o': return ci_equal(w, "of");
    case 'a': return ci_equal(w, "and");
    case 'h': return ci_equal(w, "have");
    case 'w': return ci_equal(w, "with");
    default: return false;
  }
}

std::string ratio_detail(double v, const char* op, double limit) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.3f %s %.3f", v, op, limit);
  return buf;
}

}  // namespace

quality_verdict quality_checker::filter_lines(std::string& text) {
  quality_verdict v;
  const auto& r = rules_;
  if (!r.c4_drop_javascript_lines && !r.c4_drop_policy_lines && !r.c4_drop_unpunctuated_lines &&
      r.c4_min_words_per_line == 0)
    return v;
  std::uint32_t js = 0, policy = 0, unpunct = 0, short_line = 0;
  kept_.clear();
  std::string_view rest = text;
  while (!rest.empty()) {
    std::size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    std::string_view t = trim(line);
    bool drop = false;
    if (!t.empty()) {
      if (r.c4_drop_javascript_lines && ci_contains(t, "javascript")) {
        ++js;
        drop = true;
      } else if (r.c4_drop_policy_lines &&
                 std::any_of(policy_phrases.begin(), policy_phrases.end(), [&](auto p) { return ci_contains(t, p); })) {
        ++policy;
        drop = true;
      } else if (r.c4_min_words_per_line > 0 && count_words(t) < r.c4_min_words_per_line) {
        ++short_line;
        drop = true;
      } else if (r.c4_drop_unpunctuated_lines) {
        char last = t.back();
        bool terminal = (last == '.' || last == '!' || last == '?' || last == '"' || last == '\'' ||
                         ends_with(t, "\u201D") || ends_with(t, "\u2019")) &&
                        !ends_with(t, "...");
        if (!terminal) {
          ++unpunct;
          drop = true;
        }
      }
    }
    if (!drop) {
      kept_.append(line);
      kept_ += '\n';
    }
  }
  while (!kept_.empty() && (kept_.back() == '\n' || is_blank_char(kept_.back()))) kept_.pop_back();
  if (js) v.lines_removed.emplace_back("c4_javascript", js);
  if (policy) v.lines_removed.emplace_back("c4_policy", policy);
  if (short_line) v.lines_removed.emplace_back("c4_short_line", short_line);
  if (unpunct) v.lines_removed.emplace_back("c4_no_terminal_punct", unpunct);
  if (!v.lines_removed.empty()) text.swap(kept_);
  return v;
}

quality_verdict quality_checker::check(std::string& text) {
  quality_verdict v = filter_lines(text);
  const auto& r = rules_;
  auto fail = [&](std::string_view rule, std::string detail) {
    v.pass = false;
    v.rule = rule;
    v.detail = std::move(detail);
    return v;
  };
  if (!v.lines_removed.empty() && trim(text).empty()) return fail("c4_no_lines_left", "every line was filtered out");
  if (text.size() < r.min_chars)
    return fail("min_chars", std::to_string(text.size()) + " bytes < " + std::to_string(r.min_chars));
  if (r.c4_curly_bracket && std::memchr(text.data(), '{', text.size()))
    return fail("c4_curly_bracket", "text contains '{'");
  const bool need_words = r.gopher || r.c4_lorem_ipsum || r.c4_min_sentences > 0;
  if (!need_words && !r.repetition) return v;

  std::size_t words = 0, content_words = 0, content_cps = 0, alpha_words = 0, stops = 0, symbols = 0;
  std::size_t n_lines = 0, bullet_lines = 0, ellipsis_lines = 0, line_chars = 0, para_chars_total = 0;
  std::size_t sentences = 0;
  bool lorem = false, prev_lorem = false;
  lines_.clear();
  paragraphs_.clear();
  std::uint64_t para_hash = 0;
  std::uint32_t para_chars = 0;
  const std::hash<std::string_view> hasher;
  auto end_paragraph = [&] {
    if (para_chars > 0) {
      paragraphs_.emplace_back(para_hash, para_chars);
      para_chars_total += para_chars;
    }
    para_hash = 0;
    para_chars = 0;
  };

  std::string_view rest = text;
  while (!rest.empty() || para_chars > 0) {
    if (rest.empty()) {
      end_paragraph();
      break;
    }
    std::size_t nl = rest.find('\n');
    std::string_view line = trim(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    if (line.empty()) {
      end_paragraph();
      continue;
    }
    ++n_lines;
    line_chars += line.size();
    if (r.repetition) {
      std::uint64_t h = hasher(line);
      lines_.emplace_back(h, static_cast<std::uint32_t>(line.size()));
      para_hash = mix(para_hash, h);
      para_chars += static_cast<std::uint32_t>(line.size());
    }
    if (!need_words) continue;
    if (starts_with_bullet(line)) ++bullet_lines;
    if (ends_with(line, "...") || ends_with(line, "\u2026")) ++ellipsis_lines;

    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i == line.size()) break;
      std::size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t') ++j;
      std::string_view w = line.substr(i, j - i);
      i = j;
      ++words;
      const char last = w.back();
      if ((last == '.' || last == '!' || last == '?') && (w.size() < 2 || !is_ascii_punct(static_cast<unsigned char>(w[w.size() - 2]))))
        ++sentences;
      // The core: the word without leading/trailing ASCII punctuation.
      std::size_t a = 0, b = w.size();
      while (a < b && (byte_class[static_cast<unsigned char>(w[a])] & k_punct)) ++a;
      while (b > a && (byte_class[static_cast<unsigned char>(w[b - 1])] & k_punct)) --b;
      bool alpha = false, digit = false;
      std::size_t cps = 0;
      for (std::size_t k = 0; k < w.size(); ++k) {
        const auto c = static_cast<unsigned char>(w[k]);
        const std::uint8_t cls = byte_class[c];
        if (cls & k_symbol) {
          if (c == '#') ++symbols;
          else if (c == '.' && k + 2 < w.size() && w[k + 1] == '.' && w[k + 2] == '.') ++symbols, k += 2;
          else if (c == 0xE2 && w.substr(k, 3) == "\u2026") ++symbols;
        }
        if (k < a || k >= b) continue;
        cps += (c & 0xC0) != 0x80;
        if (cls & k_alpha) {
          alpha = true;
        } else if (cls & k_digit) {
          digit = true;
        } else if (c >= 0xC2 && !alpha) {
          auto d = utf8::decode(reinterpret_cast<const unsigned char*>(w.data()) + k,
                                reinterpret_cast<const unsigned char*>(w.data()) + w.size());
          if (u_isalpha(static_cast<UChar32>(d.cp))) alpha = true;
          else if (u_isdigit(static_cast<UChar32>(d.cp))) digit = true;
        }
      }
      if (a == b) {
        prev_lorem = false;
        continue;
      }
      std::string_view core = w.substr(a, b - a);
      if (alpha || digit) {
        ++content_words;
        content_cps += cps;
      }
      if (alpha) ++alpha_words;
      if (is_stop_word(core)) ++stops;
      if (core.size() == 5) {
        if (prev_lorem && ci_equal(core, "ipsum")) lorem = true;
        prev_lorem = ci_equal(core, "lorem");
      } else {
        prev_lorem = false;
      }
    }
  }

  if (r.c4_lorem_ipsum && lorem) return fail("c4_lorem_ipsum", "text contains \"lorem ipsum\"");
  if (r.gopher) {
    if (content_words < r.min_words)
      return fail("gopher_min_words", std::to_string(content_words) + " words < " + std::to_string(r.min_words));
    if (content_words > r.max_words)
      return fail("gopher_max_words", std::to_string(content_words) + " words > " + std::to_string(r.max_words));
    double mean = static_cast<double>(content_cps) / static_cast<double>(std::max<std::size_t>(content_words, 1));
    if (mean < r.min_mean_word_length) return fail("gopher_mean_word_length", ratio_detail(mean, "<", r.min_mean_word_length));
    if (mean > r.max_mean_word_length) return fail("gopher_mean_word_length", ratio_detail(mean, ">", r.max_mean_word_length));
    const double nw = static_cast<double>(std::max<std::size_t>(words, 1));
    const double nl = static_cast<double>(std::max<std::size_t>(n_lines, 1));
    if (symbols / nw > r.max_symbol_word_ratio)
      return fail("gopher_symbol_ratio", ratio_detail(symbols / nw, ">", r.max_symbol_word_ratio));
    if (bullet_lines / nl > r.max_bullet_lines)
      return fail("gopher_bullet_lines", ratio_detail(bullet_lines / nl, ">", r.max_bullet_lines));
    if (ellipsis_lines / nl > r.max_ellipsis_lines)
      return fail("gopher_ellipsis_lines", ratio_detail(ellipsis_lines / nl, ">", r.max_ellipsis_lines));
    if (alpha_words / nw < r.min_alpha_words)
      return fail("gopher_alpha_words", ratio_detail(alpha_words / nw, "<", r.min_alpha_words));
    if (stops < r.min_stop_words)
      return fail("gopher_stop_words", std::to_string(stops) + " stop words < " + std::to_string(r.min_stop_words));
  }
  if (r.repetition && n_lines > 0) {
    auto [dl, dlc] = duplicates(lines_);
    const double nl = static_cast<double>(lines_.size());
    if (dl / nl > r.max_dup_lines) return fail("gopher_dup_lines", ratio_detail(dl / nl, ">", r.max_dup_lines));
    double lc = static_cast<double>(dlc) / static_cast<double>(std::max<std::size_t>(line_chars, 1));
    if (lc > r.max_dup_line_chars) return fail("gopher_dup_line_chars", ratio_detail(lc, ">", r.max_dup_line_chars));
    auto [dp, dpc] = duplicates(paragraphs_);
    const double np = static_cast<double>(std::max<std::size_t>(paragraphs_.size(), 1));
    if (dp / np > r.max_dup_paragraphs)
      return fail("gopher_dup_paragraphs", ratio_detail(dp / np, ">", r.max_dup_paragraphs));
    double pc = static_cast<double>(dpc) / static_cast<double>(std::max<std::size_t>(para_chars_total, 1));
    if (pc > r.max_dup_paragraph_chars)
      return fail("gopher_dup_paragraph_chars", ratio_detail(pc, ">", r.max_dup_paragraph_chars));
  }
  if (r.c4_min_sentences > 0 && sentences < r.c4_min_sentences)
    return fail("c4_min_sentences", std::to_string(sentences) + " sentences < " + std::to_string(r.c4_min_sentences));
  return v;
}

}  // namespace loom::ingest
