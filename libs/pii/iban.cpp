// IBANs (ISO 13616): country code, two check digits, BBAN of [A-Z0-9], total
// length fixed per country (the SWIFT IBAN registry), mod 97 == 1. Written
// compact ("DE89370400440532013000") or in groups of four separated by single
// spaces ("DE89 3704 0044 0532 0130 00"). Upper case only, as printed.
#include "libs/pii/detectors.hpp"

#include <array>

namespace loom::pii::detail {
namespace {

struct country {
  char code[3];
  int length;
};

// SWIFT IBAN registry (release 2024), plus long-standing partial members.
constexpr std::array<country, 89> registry = {{
    {"AD", 24}, {"AE", 23}, {"AL", 28}, {"AT", 20}, {"AZ", 28}, {"BA", 20}, {"BE", 16}, {"BG", 22}, {"BH", 22},
    {"BI", 27}, {"BR", 29}, {"BY", 28}, {"CH", 21}, {"CR", 22}, {"CY", 28}, {"CZ", 24}, {"DE", 22}, {"DJ", 27},
    {"DK", 18}, {"DO", 28}, {"EE", 20}, {"EG", 29}, {"ES", 24}, {"FI", 18}, {"FK", 18}, {"FO", 18}, {"FR", 27},
    {"GB", 22}, {"GE", 22}, {"GI", 23}, {"GL", 18}, {"GR", 27}, {"GT", 28}, {"HN", 28}, {"HR", 21}, {"HU", 28},
    {"IE", 22}, {"IL", 23}, {"IQ", 23}, {"IS", 26}, {"IT", 27}, {"JO", 30}, {"KW", 30}, {"KZ", 20}, {"LB", 28},
    {"LC", 32}, {"LI", 21}, {"LT", 20}, {"LU", 20}, {"LV", 21}, {"LY", 25}, {"MC", 27}, {"MD", 24}, {"ME", 22},
    {"MK", 19}, {"MN", 20}, {"MR", 27}, {"MT", 31}, {"MU", 30}, {"NI", 28}, {"NL", 18}, {"NO", 15}, {"OM", 23},
    {"PK", 24}, {"PL", 28}, {"PS", 29}, {"PT", 25}, {"QA", 29}, {"RO", 24}, {"RS", 22}, {"RU", 33}, {"SA", 24},
    {"SC", 31}, {"SD", 18}, {"SE", 24}, {"SI", 19}, {"SK", 24}, {"SM", 27}, {"SO", 23}, {"ST", 25}, {"SV", 28},
    {"TL", 23}, {"TN", 24}, {"TR", 26}, {"UA", 29}, {"VA", 22}, {"VG", 24}, {"XK", 20}, {"YE", 30},
}};

constexpr std::size_t max_iban = 34;

}  // namespace

int iban_length(char c0, char c1) {
  for (const auto& c : registry)
    if (c.code[0] == c0 && c.code[1] == c1) return c.length;
  return 0;
}

bool iban_ok(std::string_view s) {
  if (s.size() < 5 || s.size() > max_iban || !is_upper(byte_at(s, 0)) || !is_upper(byte_at(s, 1)) ||
      !is_digit(byte_at(s, 2)) || !is_digit(byte_at(s, 3)) || iban_length(s[0], s[1]) != static_cast<int>(s.size()))
    return false;
  // Move the first four characters to the end, letters become 10..35, the
  // number mod 97 must be 1. Folded digit by digit to stay in an int.
  int r = 0;
  for (std::size_t k = 0; k < s.size(); ++k) {
    const unsigned char c = byte_at(s, (k + 4) % s.size());
    if (is_digit(c)) {
      r = (r * 10 + (c - '0')) % 97;
    } else if (is_upper(c)) {
      r = (r * 100 + (c - 'A' + 10)) % 97;
    } else {
      return false;
    }
  }
  return r == 1;
}

bool after_iban_groups(std::string_view t, std::size_t i) {
  for (int groups = 0; groups < 8 && i >= 5 && t[i - 1] == ' '; ++groups) {
    const std::size_t g = i - 5;
    for (std::size_t k = g; k < g + 4; ++k)
      if (!is_upper(byte_at(t, k)) && !is_digit(byte_at(t, k))) return false;
    if (g > 0 && is_word(byte_at(t, g - 1))) return false;  // the end of a longer word
    if (is_upper(byte_at(t, g)) && is_upper(byte_at(t, g + 1)) && is_digit(byte_at(t, g + 2)) &&
        is_digit(byte_at(t, g + 3)))
      return true;
    i = g;
  }
  return false;
}

void find_ibans(std::string_view t, std::vector<span>& out) {
  const std::size_t n = t.size();
  char buf[max_iban];
  for (std::size_t i = 0; i + 15 <= n; ++i) {
    if (!is_upper(byte_at(t, i)) || !is_upper(byte_at(t, i + 1)) || !is_digit(byte_at(t, i + 2)) ||
        !is_digit(byte_at(t, i + 3)) || (i > 0 && is_word(byte_at(t, i - 1))))
      continue;
    const int len = iban_length(t[i], t[i + 1]);
    if (len == 0) continue;
    // Compact, else grouped by four: read `len` characters.
    std::size_t j = i, got = 0;
    const bool grouped = t.size() > i + 4 && t[i + 4] == ' ';
    while (got < static_cast<std::size_t>(len) && j < n) {
      if (grouped && got > 0 && got % 4 == 0) {
        if (t[j] != ' ') break;
        ++j;
        if (j >= n) break;
      }
      const unsigned char c = byte_at(t, j);
      if (!is_upper(c) && !is_digit(c)) break;
      buf[got++] = static_cast<char>(c);
      ++j;
    }
    if (got != static_cast<std::size_t>(len) || (j < n && is_word(byte_at(t, j)))) continue;
    if (!iban_ok(std::string_view(buf, got))) continue;
    out.push_back(span{pii_type::iban, i, j});
    i = j - 1;
  }
}

}  // namespace loom::pii::detail
