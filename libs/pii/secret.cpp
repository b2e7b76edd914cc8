// Secrets: credentials in known formats, and high-entropy tokens.
//
// Known formats (each at a word start, its body then ends at a non-body byte):
//   AWS key ids        AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AIPA|ANPA|ANVA|AROA|APKA|ASCA + 16 [A-Z0-9]
//   Google API keys    AIza + 35 [A-Za-z0-9_-]
//   GitHub tokens      gh[pousr]_ + >= 36 [A-Za-z0-9];  github_pat_ + >= 40 [A-Za-z0-9_]
//   GitLab tokens      glpat- + >= 20 [A-Za-z0-9_-]
//   Slack tokens       xox[baprs]- + >= 10 [A-Za-z0-9-]
//   Stripe keys        sk_live_|sk_test_|rk_live_|rk_test_ + >= 16 [A-Za-z0-9]
//   OpenAI/Anthropic   sk-ant-|sk-proj- + >= 20 [A-Za-z0-9_-];  sk- + >= 32 [A-Za-z0-9]
//   npm tokens         npm_ + 36 [A-Za-z0-9]
//   JWTs               eyJ... . eyJ... . signature (base64url; 10, 10, >= 16 characters)
//   private keys       -----BEGIN <...>PRIVATE KEY[ BLOCK]----- through its -----END ...-----
//                      (without an END line: the header and the base64 lines under it)
// High-entropy token: a maximal run of [A-Za-z0-9+/_-] (plus '=' padding) of
// >= options::entropy_min_length characters (24) and <= 512 that holds upper,
// lower case and digits, has >= options::entropy_bits bits of Shannon entropy
// per character (4.0), and changes character class (upper/lower/digit/other)
// between >= 40% of adjacent pairs. Random base62 keys pass at 91% (24
// characters), 98.7% (32), 99.5% (40), 99.9% (64). The last rule drops CamelCase identifiers
// ("ThisIsAVeryLongIdentifier123": ~35%; random base62 keys: ~62%); paths
// (path_like) are skipped. Hex-only strings (hashes, UUIDs) lack upper case and
// are not flagged: they cannot be told from checksums.
#include "libs/pii/detectors.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

namespace loom::pii::detail {
namespace {

enum body : std::uint8_t { b_upper_digit, b_alnum, b_alnum_us, b_alnum_us_dash, b_alnum_dash };

bool in_body(body b, unsigned char c) {
  switch (b) {
    case b_upper_digit: return is_upper(c) || is_digit(c);
    case b_alnum: return is_alnum(c);
    case b_alnum_us: return is_alnum(c) || c == '_';
    case b_alnum_us_dash: return is_alnum(c) || c == '_' || c == '-';
    case b_alnum_dash: return is_alnum(c) || c == '-';
  }
  return false;
}

struct rule {
  std::string_view prefix;
  body chars;
  std::size_t min, max;  // body length
};

// Longer prefixes before their own prefixes ("sk-ant-" before "sk-").
constexpr std::array<rule, 34> rules = {{
    {"AKIA", b_upper_digit, 16, 16}, {"ASIA", b_upper_digit, 16, 16}, {"ABIA", b_upper_digit, 16, 16},
    {"ACCA", b_upper_digit, 16, 16}, {"AGPA", b_upper_digit, 16, 16}, {"AIDA", b_upper_digit, 16, 16},
    {"AIPA", b_upper_digit, 16, 16}, {"ANPA", b_upper_digit, 16, 16}, {"ANVA", b_upper_digit, 16, 16},
    {"AROA", b_upper_digit, 16, 16}, {"APKA", b_upper_digit, 16, 16}, {"ASCA", b_upper_digit, 16, 16},
    {"AIza", b_alnum_us_dash, 35, 35},
    {"ghp_", b_alnum, 36, 255}, {"gho_", b_alnum, 36, 255}, {"ghu_", b_alnum, 36, 255},
    {"ghs_", b_alnum, 36, 255}, {"ghr_", b_alnum, 36, 255}, {"github_pat_", b_alnum_us, 40, 255},
    {"glpat-", b_alnum_us_dash, 20, 255},
    {"xoxb-", b_alnum_dash, 10, 255}, {"xoxa-", b_alnum_dash, 10, 255}, {"xoxp-", b_alnum_dash, 10, 255},
    {"xoxr-", b_alnum_dash, 10, 255}, {"xoxs-", b_alnum_dash, 10, 255},
    {"sk_live_", b_alnum, 16, 255}, {"sk_test_", b_alnum, 16, 255}, {"rk_live_", b_alnum, 16, 255},
    {"rk_test_", b_alnum, 16, 255},
    {"sk-ant-", b_alnum_us_dash, 20, 255}, {"sk-proj-", b_alnum_us_dash, 20, 255}, {"sk-", b_alnum, 32, 255},
    {"npm_", b_alnum, 36, 36},
    {"eyJ", b_alnum_us_dash, 0, 0},  // JWT: checked by jwt_end
}};

constexpr std::size_t max_token = 512;     // longer runs are data blobs, not keys
constexpr std::size_t max_pem = 64 << 10;  // a 16k-bit RSA key in PEM is ~13 KB
constexpr double min_switch_ratio = 0.40;
// Every known format's first token (its body is token characters) is at least
// this long: "xoxb-" + 10, and a JWT's "eyJ" + 10 before its first '.'. Most
// words are shorter, so most tokens skip the prefix table.
constexpr std::size_t min_known = 13;

bool is_b64url(unsigned char c) { return is_alnum(c) || c == '_' || c == '-'; }
constexpr std::array<bool, 256> token_table = [] {
  std::array<bool, 256> a{};
  for (int c = 0; c < 256; ++c)
    a[c] = (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '+' || c == '/' ||
           c == '_' || c == '-';
  return a;
}();
bool is_token(unsigned char c) { return token_table[c]; }

std::size_t b64url_run(std::string_view t, std::size_t i) {
  while (i < t.size() && is_b64url(byte_at(t, i))) ++i;
  return i;
}

// A JWT at t[i] ("eyJ"): its end, or 0.
std::size_t jwt_end(std::string_view t, std::size_t i) {
  const std::size_t a = b64url_run(t, i);
  if (a - i < 10 || a + 4 >= t.size() || t[a] != '.' || t.compare(a + 1, 3, "eyJ") != 0) return 0;
  const std::size_t b = b64url_run(t, a + 1);
  if (b - a - 1 < 10 || b + 1 >= t.size() || t[b] != '.') return 0;
  const std::size_t c = b64url_run(t, b + 1);
  if (c - b - 1 < 16 || (c < t.size() && (t[c] == '=' || t[c] == '+' || t[c] == '/'))) return 0;
  return c;
}

// The end of a known-format secret at t[i], or 0.
std::size_t known_end(std::string_view t, std::size_t i) {
  for (const rule& r : rules) {
    if (t.compare(i, r.prefix.size(), r.prefix) != 0) continue;
    if (r.prefix == "eyJ") return jwt_end(t, i);
    std::size_t j = i + r.prefix.size();
    while (j < t.size() && in_body(r.chars, byte_at(t, j)) && j - i - r.prefix.size() <= r.max) ++j;
    const std::size_t len = j - i - r.prefix.size();
    if (len < r.min || len > r.max || (j < t.size() && is_word(byte_at(t, j)))) continue;
    return j;
  }
  return 0;
}

bool may_start(unsigned char c) {
  return c == 'A' || c == 'g' || c == 'x' || c == 's' || c == 'r' || c == 'n' || c == 'e';
}

bool is_b64_line_char(unsigned char c) { return is_alnum(c) || c == '+' || c == '/' || c == '='; }

// Private-key PEM blocks, found by searching for "-----BEGIN ".
void find_pem(std::string_view t, std::vector<span>& out) {
  constexpr std::string_view begin = "-----BEGIN ", dashes = "-----";
  std::size_t pos = 0;
  while (pos < t.size()) {
    const std::size_t s = t.find(begin, pos);
    if (s == std::string_view::npos) return;
    pos = s + begin.size();
    const std::size_t label_end = t.find(dashes, pos);
    if (label_end == std::string_view::npos || label_end - pos > 64) continue;
    const std::string_view label = t.substr(pos, label_end - pos);
    if (!label.ends_with("PRIVATE KEY") && !label.ends_with("PRIVATE KEY BLOCK")) continue;
    std::size_t e = label_end + dashes.size();
    const std::size_t end_marker = t.substr(0, std::min(t.size(), s + max_pem)).find("-----END ", e);
    if (end_marker != std::string_view::npos) {
      const std::size_t close = t.find(dashes, end_marker + 9);
      if (close != std::string_view::npos && close - end_marker < 80) e = close + dashes.size();
    } else {  // no END line: the base64 (and "Header: value") lines under the header
      for (std::size_t line = e; line < t.size() && line < s + max_pem;) {
        if (t[line] == '\r') ++line;
        if (line >= t.size() || t[line] != '\n') break;
        std::size_t k = line + 1;
        bool body = true;
        for (; k < t.size() && t[k] != '\n' && t[k] != '\r'; ++k) {
          const unsigned char ch = byte_at(t, k);
          body = body && (is_b64_line_char(ch) || ch == ':' || ch == ' ' || ch == ',' || ch == '-');
        }
        if (!body || k == line + 1) break;
        e = line = k;
      }
    }
    out.push_back(span{pii_type::secret, s, e});
    pos = e;
  }
}

// A token with '/' is a path or URL part ("cpan/Compress-Raw-Bzip2/bzip2-src",
// "//host") when it has "//" or a piece between '/', '-', '_' of three or more
// lower-case letters only: random base64 has such a piece in well under 1% of
// 40-character keys, paths nearly always.
bool path_like(std::string_view tok) {
  if (tok.find('/') == std::string_view::npos) return false;
  if (tok.find("//") != std::string_view::npos) return true;
  std::size_t run = 0;
  bool lower_only = true;
  for (std::size_t k = 0; k <= tok.size(); ++k) {
    const unsigned char c = k < tok.size() ? byte_at(tok, k) : '/';
    if (c == '/' || c == '-' || c == '_') {
      if (lower_only && run >= 3) return true;
      run = 0;
      lower_only = true;
    } else {
      ++run;
      lower_only = lower_only && is_lower(c);
    }
  }
  return false;
}

int char_class(unsigned char c) { return is_upper(c) ? 0 : is_lower(c) ? 1 : is_digit(c) ? 2 : 3; }

bool high_entropy(std::string_view tok, const options& o) {
  bool up = false, low = false, dig = false;
  std::size_t switches = 0;
  for (std::size_t k = 0; k < tok.size(); ++k) {
    const unsigned char c = byte_at(tok, k);
    up = up || is_upper(c);
    low = low || is_lower(c);
    dig = dig || is_digit(c);
    if (k > 0 && char_class(c) != char_class(byte_at(tok, k - 1))) ++switches;
  }
  if (!up || !low || !dig) return false;
  if (static_cast<double>(switches) < min_switch_ratio * static_cast<double>(tok.size() - 1)) return false;
  return shannon_bits(tok) >= o.entropy_bits;
}

}  // namespace

double shannon_bits(std::string_view s) {
  if (s.empty()) return 0;
  std::array<std::uint32_t, 256> count{};
  for (unsigned char c : s) ++count[c];
  double h = 0;
  const double n = static_cast<double>(s.size());
  for (std::uint32_t c : count)
    if (c) h -= (c / n) * std::log2(c / n);
  return h;
}

void find_secrets(std::string_view t, const options& o, std::vector<span>& known, std::vector<span>& entropic) {
  const std::size_t n = t.size();
  find_pem(t, known);
  for (std::size_t i = 0; i < n;) {
    while (i < n && !is_token(byte_at(t, i))) ++i;
    if (i >= n) break;
    std::size_t e = i;
    while (e < n && is_token(byte_at(t, e))) ++e;
    // A token [i, e): known formats first, then the entropy rule.
    if (e - i >= min_known && may_start(byte_at(t, i))) {
      if (const std::size_t k = known_end(t, i); k != 0) {
        known.push_back(span{pii_type::secret, i, k});
        i = std::max(k, e);
        continue;
      }
    }
    std::size_t pe = e;
    while (pe < n && pe - e < 2 && t[pe] == '=') ++pe;
    const std::string_view tok = t.substr(i, e - i);
    if (tok.size() >= o.entropy_min_length && tok.size() <= max_token && !path_like(tok) &&
        (pe >= n || !is_word(byte_at(t, pe))) && high_entropy(tok, o))
      entropic.push_back(span{pii_type::secret, i, pe});
    i = e;
  }
}

}  // namespace loom::pii::detail
