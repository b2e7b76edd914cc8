#include "tests/tokenizer/corpus.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace loom::test::tok {
namespace {

// splitmix64: tiny, and the same sequence on every platform and library.
struct rng {
  std::uint64_t s;
  std::uint64_t operator()() {
    std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  std::size_t below(std::size_t n) { return static_cast<std::size_t>((*this)() % n); }
  bool one_in(std::size_t n) { return below(n) == 0; }
  char32_t in(char32_t lo, char32_t hi) { return lo + static_cast<char32_t>(below(hi - lo + 1)); }
  template <class T, std::size_t N>
  const T& pick(const T (&a)[N]) { return a[below(N)]; }
};

const char* english[] = {
    "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not", "he",
    "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you", "were", "their",
    "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will", "would", "who", "so",
    "people", "time", "water", "government", "information", "university", "development", "tokenization",
    "unbelievable", "antidisestablishmentarianism", "Mississippi", "naïve", "café", "résumé", "coöperate",
    "façade", "jalapeño", "Zürich", "straße", "fjord", "rhythm", "queue", "xylophone", "GPT", "OpenAI", "iPhone",
    "McDonald", "O'Brien", "e-mail", "well-known", "state-of-the-art", "U.S.A.", "Ph.D.", "etc.", "vs."};
const char* contractions[] = {"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE", "'VE", "'M", "'LL",
                              "'D", "'Re", "'rE", "'Ll", "'lL", "'Ve", "\xE2\x80\x99s", "\xE2\x80\x99t",
                              "\xE2\x80\x99re", "''s", "'''", "'", "'x", "'r", "'v", "'l"};
const char* spaces[] = {" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", "\r\n\r\n", "\r", "\x0B", "\x0C",
                        "\xC2\xA0", "\xC2\x85", "\xE1\x9A\x80", "\xE2\x80\x80", "\xE2\x80\x83", "\xE2\x80\x89",
                        "\xE2\x80\x8A", "\xE2\x80\xA8", "\xE2\x80\xA9", "\xE2\x80\xAF", "\xE2\x81\x9F",
                        "\xE3\x80\x80", " \n ", "\n \t", " \xC2\xA0 ",
                        // look like space, are not \s: ZWSP, MVS, ZWNBSP, WJ, file/group separators
                        "\xE2\x80\x8B", "\xE1\xA0\x8E", "\xEF\xBB\xBF", "\xE2\x81\xA0", "\x1C", "\x1F"};
const char* punctuation[] = {"!", "?", ".", ",", ";", ":", "-", "--", "...", "!!!", "?!", "(", ")", "[", "]", "{",
                             "}", "\"", "'", "`", "~", "@", "#", "$", "%", "^", "&", "*", "_", "+", "=", "|",
                             "\\", "/", "<", ">", "\xE2\x80\x94", "\xE2\x80\xA6", "\xC2\xAB", "\xC2\xBB",
                             "\xC2\xBF", "\xC2\xA1", "\xC2\xB7", "\xE2\x80\xA2", "\xE2\x80\xA0", "\xE2\x80\xB0",
                             "\xC2\xA7", "\xC2\xA9", "\xC2\xAE", "\xE2\x84\xA2", "\xE2\x88\x91", "\xE2\x89\x88",
                             "\xE2\x86\x92", "\xE3\x80\x82", "\xEF\xBC\x8C", "\xE3\x80\x8C", "\xE3\x80\x8D",
                             "<|endoftext|>", "\xE2\x80\x9C", "\xE2\x80\x9D", "\xE2\x82\xAC"};
const char* code_tokens[] = {
    "int", "return", "if", "else", "for", "while", "def", "class", "self", "const", "auto", "std::vector",
    "nullptr", "import", "from", "function", "let", "var", "=>", "->", "::", "==", "!=", "<=", ">=", "+=", "&&",
    "||", "<<", ">>", "++", "(", ")", "{", "}", "[", "]", ";", ",", ".", "0x1F", "42", "3.14", "1e-9", "i", "j",
    "camelCaseName", "snake_case_name", "SCREAMING_CASE", "__init__", "std::string_view", "#include", "<stdio.h>",
    "printf(\"%d\\n\", x)", "// comment", "/* block */", "# python comment", "\"string\"", "'c'", "`tmpl ${x}`",
    "https://example.com/path?q=1&r=2", "/usr/local/lib", "C:\\Windows\\System32", "<div class=\"x\">", "</div>",
    "{\"key\": [1, 2, 3]}", "@decorator", "$var", "%%", "x[i][j]", "a.b.c()", "0b1010", "1_000_000", "u8\"\""};

struct script {
  const char* name;
  char32_t lo, hi;         // base letters
  char32_t mark_lo, mark_hi;  // combining marks used in this script (0 = none)
  bool spaced;              // words separated by spaces
};
const script scripts[] = {
    {"latin1", 0x00E0, 0x00FF, 0, 0, true},      {"latin-ext", 0x0100, 0x017F, 0, 0, true},
    {"latin+marks", 0x0061, 0x007A, 0x0300, 0x036F, true},
    {"cyrillic", 0x0410, 0x044F, 0, 0, true},    {"greek", 0x03AC, 0x03CE, 0, 0, true},
    {"armenian", 0x0561, 0x0586, 0, 0, true},    {"hebrew", 0x05D0, 0x05EA, 0x05B0, 0x05BC, true},
    {"arabic", 0x0621, 0x064A, 0x064B, 0x0652, true}, {"devanagari", 0x0915, 0x0939, 0x093E, 0x094D, true},
    {"tamil", 0x0B95, 0x0BB9, 0x0BBE, 0x0BCD, true}, {"thai", 0x0E01, 0x0E2E, 0x0E31, 0x0E3A, false},
    {"georgian", 0x10D0, 0x10FA, 0, 0, true},    {"ethiopic", 0x1200, 0x135A, 0, 0, true},
    {"hangul", 0xAC00, 0xD7A3, 0, 0, true},      {"hiragana", 0x3041, 0x3096, 0, 0, false},
    {"katakana", 0x30A1, 0x30FA, 0, 0, false},   {"cjk", 0x4E00, 0x9FFF, 0, 0, false},
    {"cjk-ext-b", 0x20000, 0x2A6DF, 0, 0, false}};

struct gen {
  rng r;
  std::string out;

  void cp(char32_t c) { append_utf8(out, c); }
  void space() { out += r.one_in(3) ? r.pick(spaces) : " "; }

  void english_word(bool capital) {
    std::string w = r.pick(english);
    if (capital && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 32);
    if (r.one_in(40)) for (auto& ch : w) if (ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 32);
    out += w;
    if (r.one_in(12)) out += r.pick(contractions);
  }
  void number() {
    switch (r.below(12)) {
      case 0: for (std::size_t n = 1 + r.below(300); n--;) out += static_cast<char>('0' + r.below(10)); break;
      case 1: out += std::to_string(r.below(1000)) + "," + std::to_string(100 + r.below(900)) + ",000"; break;
      case 2: out += std::to_string(r.below(100)) + "." + std::to_string(r.below(100000)); break;
      case 3: out += "-" + std::to_string(r()); break;
      case 4: out += "20" + std::to_string(10 + r.below(20)) + "-0" + std::to_string(1 + r.below(9)) + "-1" +
                     std::to_string(r.below(10)); break;
      case 5: for (int n = 1 + static_cast<int>(r.below(8)); n--;) cp(0x0660 + static_cast<char32_t>(r.below(10))); break;
      case 6: for (int n = 1 + static_cast<int>(r.below(8)); n--;) cp(0x0966 + static_cast<char32_t>(r.below(10))); break;
      case 7: for (int n = 1 + static_cast<int>(r.below(8)); n--;) cp(0xFF10 + static_cast<char32_t>(r.below(10))); break;
      case 8: cp(r.pick({U'\u00B2', U'\u00B3', U'\u00B9', U'\u00BD', U'\u00BC', U'\u2153', U'\u2070'})); break;
      case 9: cp(r.in(0x2160, 0x2188)); break;  // Roman numerals (Nl)
      case 10: cp(r.in(0x2460, 0x249B)); break;  // circled and parenthesised numbers (No)
      default: out += "v" + std::to_string(r.below(10)) + "." + std::to_string(r.below(20)) + "abc" +
                      std::to_string(r.below(1000)); break;
    }
  }
  void script_word(const script& s) {
    for (std::size_t n = 1 + r.below(s.spaced ? 10 : 30); n--;) {
      cp(r.in(s.lo, s.hi));
      if (s.mark_lo && r.one_in(3)) cp(r.in(s.mark_lo, s.mark_hi));
    }
  }
  void emoji() {
    switch (r.below(9)) {
      case 0: cp(r.in(0x1F600, 0x1F64F)); break;
      case 1: cp(r.in(0x1F300, 0x1F5FF)); break;
      case 2: cp(r.in(0x1F900, 0x1F9FF)); break;
      case 3: cp(r.in(0x2600, 0x26FF)); cp(0xFE0F); break;
      case 4: cp(r.pick({U'\U0001F44D', U'\U0001F44B', U'\U0001F9D1', U'\U0001F469', U'\U0001F64F'}));
              cp(r.in(0x1F3FB, 0x1F3FF)); break;  // skin tone
      case 5: cp(0x1F468); cp(0x200D); cp(0x1F469); cp(0x200D); cp(0x1F467); cp(0x200D); cp(0x1F466); break;
      case 6: cp(0x1F9D1); cp(r.in(0x1F3FB, 0x1F3FF)); cp(0x200D); cp(0x1F4BB); break;
      case 7: cp(0x1F3F3); cp(0xFE0F); cp(0x200D); cp(0x1F308); break;
      default:
        if (r.one_in(2)) { cp(r.in(0x1F1E6, 0x1F1FF)); cp(r.in(0x1F1E6, 0x1F1FF)); }  // flag
        else { out += static_cast<char>('0' + r.below(10)); cp(0xFE0F); cp(0x20E3); }  // keycap
    }
  }
  void any_scalar() {
    char32_t c;
    do c = static_cast<char32_t>(r.one_in(4) ? r.below(0x110000) : r.below(0x3000)); while (c >= 0xD800 && c <= 0xDFFF);
    cp(c);
  }

  // One kind's worth of text, about `n` bytes.
  void fill(const std::string& kind, std::size_t n) {
    const std::size_t stop = out.size() + n;
    if (kind == "prose") {
      while (out.size() < stop) {
        for (int w = 0, nw = 4 + static_cast<int>(r.below(20)); w < nw; ++w) {
          if (w) out += r.one_in(25) ? r.pick(spaces) : " ";
          if (r.one_in(15)) number();
          else english_word(w == 0);
          if (r.one_in(10)) out += r.pick({",", ";", ":", " -", " (", ")", "\""});
        }
        out += r.pick({". ", "? ", "! ", ".\n", ".\n\n", "...", ". <|endoftext|>"});
      }
    } else if (kind == "code") {
      int depth = 0;
      while (out.size() < stop) {
        const bool tabs = r.one_in(3);
        for (int d = 0; d < depth; ++d) out += tabs ? "\t" : (r.one_in(2) ? "    " : "  ");
        for (int t = 0, nt = 1 + static_cast<int>(r.below(10)); t < nt; ++t) {
          out += r.pick(code_tokens);
          if (!r.one_in(3)) out += " ";
        }
        if (r.one_in(6)) out += "   ";  // trailing whitespace
        out += r.one_in(8) ? "\r\n" : "\n";
        if (r.one_in(7)) out += "\n";
        depth = std::max(0, std::min(6, depth + static_cast<int>(r.below(3)) - 1));
      }
    } else if (kind == "scripts") {
      while (out.size() < stop) {
        const script& s = r.pick(scripts);
        for (int w = 0, nw = 1 + static_cast<int>(r.below(12)); w < nw; ++w) {
          script_word(s);
          if (r.one_in(6)) out += r.pick(punctuation);
          if (s.spaced || r.one_in(4)) space();
        }
      }
    } else if (kind == "emoji") {
      while (out.size() < stop) {
        if (r.one_in(3)) english_word(false);
        for (std::size_t k = 1 + r.below(4); k--;) emoji();
        if (!r.one_in(4)) space();
      }
    } else if (kind == "whitespace") {
      while (out.size() < stop) {
        for (std::size_t k = r.below(6); k--;) out += r.pick(spaces);
        if (r.one_in(2)) english_word(false);
        else if (r.one_in(2)) out += r.pick(punctuation);
        else number();
      }
    } else if (kind == "numbers") {
      while (out.size() < stop) {
        number();
        out += r.pick({" ", ", ", "\n", "+", "x", " = ", "%", "abc", "\t"});
      }
    } else if (kind == "contractions") {
      while (out.size() < stop) {
        english_word(r.one_in(3));
        out += r.pick(contractions);
        if (r.one_in(3)) out += r.pick(contractions);
        out += r.pick({" ", " ", "\n", ". ", "'", " '", ""});
      }
    } else if (kind == "punctuation") {
      while (out.size() < stop) {
        for (std::size_t k = 1 + r.below(40); k--;) out += r.pick(punctuation);
        if (r.one_in(2)) out += " ";
        if (r.one_in(3)) english_word(false);
      }
    } else if (kind == "soup") {
      while (out.size() < stop) {
        if (r.one_in(3)) out += static_cast<char>(0x20 + r.below(0x5F));
        else if (r.one_in(5)) out += r.pick(spaces);
        else any_scalar();
      }
    } else if (kind == "long_runs") {  // long pieces: the O(n log n) merge path
      while (out.size() < stop) {
        const std::size_t len = 50 + r.below(4000);
        const std::size_t start = out.size();
        switch (r.below(6)) {
          case 0: out.append(len, static_cast<char>('a' + r.below(26))); break;
          case 1: while (out.size() - start < len) out += static_cast<char>('a' + r.below(r.one_in(2) ? 3 : 26)); break;
          case 2: while (out.size() - start < len) out += static_cast<char>('0' + r.below(10)); break;
          case 3: while (out.size() - start < len) out += r.pick({"=", "-", "*", "!", "."}); break;
          case 4: while (out.size() - start < len) cp(r.in(0x4E00, 0x4E20)); break;
          default: while (out.size() - start < len) out += r.pick({"ab", "ing", "tion", "ee", "ll"}); break;
        }
        space();
      }
    }
  }
};

const char* kinds[] = {"prose", "code", "scripts", "emoji", "whitespace", "numbers",
                       "contractions", "punctuation", "soup", "long_runs", "mixed"};

}  // namespace

void append_utf8(std::string& s, char32_t c) {
  if (c < 0x80) {
    s += static_cast<char>(c);
  } else if (c < 0x800) {
    s += static_cast<char>(0xC0 | (c >> 6));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    s += static_cast<char>(0xE0 | (c >> 12));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (c >> 18));
    s += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (c & 0x3F));
  }
}

std::vector<document> generate(std::uint64_t seed, std::size_t target_bytes) {
  gen g{rng{seed}, {}};
  std::vector<document> docs;
  std::size_t total = 0;
  while (total < target_bytes) {
    std::string kind = kinds[docs.size() % std::size(kinds)];
    // Sizes log-uniform in 100 B .. 64 KB: many small documents, a few big ones.
    const auto size = static_cast<std::size_t>(100.0 * std::pow(655.36, static_cast<double>(g.r.below(1001)) / 1000));
    g.out.clear();
    if (g.r.one_in(8)) g.out += g.r.pick(spaces);  // leading whitespace
    if (kind == "mixed") {
      while (g.out.size() < size) g.fill(kinds[g.r.below(std::size(kinds) - 1)], 200 + g.r.below(2000));
    } else {
      g.fill(kind, size);
    }
    if (g.r.one_in(6)) g.out += g.r.pick(spaces);  // trailing whitespace
    total += g.out.size();
    docs.push_back({std::move(kind), std::move(g.out)});
  }
  return docs;
}

std::vector<document> code_point_sweep() {
  std::vector<document> docs;
  document d{"sweep", {}};
  int n = 0;
  for (char32_t c = 0; c <= 0x10FFFF; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    d.text += "  ";
    append_utf8(d.text, c);
    d.text += "'s";
    if (++n % 4096 == 0) docs.push_back(std::exchange(d, document{"sweep", {}}));
  }
  if (!d.text.empty()) docs.push_back(std::move(d));
  return docs;
}

void append_frame(std::string& out, std::string_view text) {
  const auto n = static_cast<std::uint32_t>(text.size());
  for (int k = 0; k < 4; ++k) out += static_cast<char>((n >> (8 * k)) & 0xFF);
  out += text;
}

std::optional<std::vector<std::vector<std::uint32_t>>> parse_ids(const std::string& framed) {
  const auto u32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (int k = 0; k < 4; ++k) v |= std::uint32_t{static_cast<unsigned char>(framed[at + k])} << (8 * k);
    return v;
  };
  std::vector<std::vector<std::uint32_t>> all;
  for (std::size_t pos = 0; pos + 4 <= framed.size();) {
    const std::uint32_t n = u32(pos);
    pos += 4;
    if (pos + 4ull * n > framed.size()) return std::nullopt;
    std::vector<std::uint32_t> v(n);
    for (std::uint32_t i = 0; i < n; ++i) v[i] = u32(pos + 4 * i);
    pos += 4ull * n;
    all.push_back(std::move(v));
  }
  return all;
}

}  // namespace loom::test::tok
