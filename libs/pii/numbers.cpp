// Payment cards and US social security numbers: digit runs at word starts.
//
// Card: 13-19 digits, either unbroken or in groups separated by one kind of
// separator (single spaces or single dashes) of 3-6 digits each, Luhn-valid,
// with an issuer prefix (IIN) and length that a card network uses
// (card_prefix_ok). In a longer run of groups ("in 2019 4111 1111 1111 1111
// 2027") the earliest valid sequence of whole groups wins, then the longest.
//
// SSN: AAA-GG-SSSS with dashes only (a bare 9-digit number is too ambiguous),
// excluding what the SSA never issues: area 000, 666 and 900-999, group 00,
// serial 0000, and the two numbers voided after public misuse.
#include "libs/pii/detectors.hpp"

#include <string>

namespace loom::pii::detail {
namespace {

constexpr std::size_t min_card = 13, max_card = 19;

int prefix_int(std::string_view d, std::size_t k) {
  int v = 0;
  for (std::size_t i = 0; i < k && i < d.size(); ++i) v = v * 10 + (d[i] - '0');
  return v;
}

// A run may start here: no word character or number-ish punctuation before.
bool number_start(std::string_view t, std::size_t i) {
  if (i == 0) return true;
  const unsigned char p = byte_at(t, i - 1);
  if (is_word(p)) return false;
  if ((p == '.' || p == '-' || p == ',' || p == '/' || p == '+') && i >= 2 && is_digit(byte_at(t, i - 2))) return false;
  return p != '+';
}

// After a number: no word character and no further digits behind '.', ',' or '-'.
bool number_end(std::string_view t, std::size_t e) {
  if (e >= t.size()) return true;
  const unsigned char c = byte_at(t, e);
  if (is_word(c)) return false;
  if ((c == '.' || c == ',' || c == '-' || c == '/') && e + 1 < t.size() && is_digit(byte_at(t, e + 1))) return false;
  return true;
}

}  // namespace

bool luhn_ok(std::string_view d) {
  int sum = 0;
  bool dbl = false;
  for (std::size_t i = d.size(); i-- > 0;) {
    int v = d[i] - '0';
    if (dbl && (v *= 2) > 9) v -= 9;
    sum += v;
    dbl = !dbl;
  }
  return !d.empty() && sum % 10 == 0;
}

// Issuer ranges (ISO/IEC 7812 IINs as the networks publish them):
// Visa 4 (13, 16, 19); Mastercard 51-55 and 2221-2720 (16); Mir 2200-2204
// (16-19); Amex 34, 37 (15); Diners 300-305, 3095, 36, 38, 39 (14-19);
// JCB 3528-3589 (16-19); Maestro 50, 56-58 (13-19); Discover, UnionPay,
// RuPay, Maestro and others 60-69 (13-19); Troy 9792 (16).
bool card_prefix_ok(std::string_view d) {
  const std::size_t n = d.size();
  if (n < min_card || n > max_card) return false;
  const int p2 = prefix_int(d, 2), p3 = prefix_int(d, 3), p4 = prefix_int(d, 4);
  switch (d[0]) {
    case '4': return n == 13 || n == 16 || n == 19;
    case '2':
      if (p4 >= 2221 && p4 <= 2720) return n == 16;
      return p4 >= 2200 && p4 <= 2204 && n >= 16;
    case '3':
      if (p2 == 34 || p2 == 37) return n == 15;
      if ((p3 >= 300 && p3 <= 305) || p4 == 3095 || p2 == 36 || p2 == 38 || p2 == 39) return n >= 14;
      return p4 >= 3528 && p4 <= 3589 && n >= 16;
    case '5':
      if (p2 >= 51 && p2 <= 55) return n == 16;
      return p2 == 50 || (p2 >= 56 && p2 <= 58);
    case '6': return true;
    case '9': return p4 == 9792 && n == 16;
    default: return false;
  }
}

bool ssn_ok(int area, int group, int serial) {
  if (area == 0 || area == 666 || area >= 900 || group == 0 || serial == 0) return false;
  if ((area == 78 && group == 5 && serial == 1120) || (area == 219 && group == 9 && serial == 9999)) return false;
  return true;
}

void find_cards(std::string_view t, std::vector<span>& out) {
  struct group {
    std::size_t start, end;  // text offsets of its first digit and one past its last
  };
  constexpr std::size_t max_groups = 12, max_group_digits = 6;
  const std::size_t n = t.size();
  group g[max_groups];
  std::string digits;
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_digit(byte_at(t, i))) continue;
    if (!number_start(t, i)) {
      while (i + 1 < n && is_digit(byte_at(t, i + 1))) ++i;
      continue;
    }
    // The run: digit groups joined by one kind of single separator.
    std::size_t ng = 0, j = i;
    char sep = 0;
    while (ng < max_groups) {
      const std::size_t s = j;
      while (j < n && is_digit(byte_at(t, j))) ++j;
      g[ng++] = group{s, j};
      if (j + 1 < n && (t[j] == ' ' || t[j] == '-') && (sep == 0 || sep == t[j]) && is_digit(byte_at(t, j + 1))) {
        sep = t[j++];
        continue;
      }
      break;
    }
    // Candidates: groups [a, b), earliest start first, then the longest. When
    // the groups from a to the end are printed as cards are (fours, then a last
    // group of 3-6; or 4-6-4 and 4-6-5), that is the only candidate from a:
    // a 19-digit number failing Luhn does not yield a 16-digit prefix that
    // passes by chance, while "4111 1111 1111 1111 2027" still finds its card.
    const auto printed_layout = [&](std::size_t a, std::size_t b) {
      const auto len = [&](std::size_t k) { return g[k].end - g[k].start; };
      if (b - a == 3 && len(a) == 4 && len(a + 1) == 6 && (len(a + 2) == 4 || len(a + 2) == 5)) return true;
      for (std::size_t k = a; k + 1 < b; ++k)
        if (len(k) != 4) return false;
      return b - a >= 2 && len(b - 1) >= 3 && len(b - 1) <= 6;
    };
    const auto well_formed = [&](std::size_t a, std::size_t b) {
      std::size_t total = 0;
      for (std::size_t k = a; k < b; ++k) {
        const std::size_t len = g[k].end - g[k].start;
        if (b - a > 1 && (len < 3 || len > max_group_digits)) return false;
        total += len;
      }
      return total >= min_card && total <= max_card;
    };
    for (std::size_t a = after_iban_groups(t, i) ? ng : 0; a < ng; ++a) {
      const bool whole_only = well_formed(a, ng) && (ng - a == 1 || printed_layout(a, ng));
      for (std::size_t b = ng; b > a; --b) {
        if (b < ng && whole_only) break;
        if ((b == ng && !number_end(t, g[b - 1].end)) || !well_formed(a, b)) continue;
        digits.clear();
        for (std::size_t k = a; k < b; ++k) digits.append(t.data() + g[k].start, g[k].end - g[k].start);
        if (luhn_ok(digits) && card_prefix_ok(digits)) {
          out.push_back(span{pii_type::credit_card, g[a].start, g[b - 1].end});
          a = b - 1;
          break;
        }
      }
    }
    // A run cut short by the other separator ("3 3548-0529-..."): its last group
    // may begin a card of its own, so scan on from there.
    const std::size_t e = g[ng - 1].end;
    const bool cut = ng > 1 && e + 1 < n && (t[e] == ' ' || t[e] == '-') && t[e] != sep && is_digit(byte_at(t, e + 1));
    i = cut ? g[ng - 1].start - 1 : e - 1;
  }
}

void find_ssns(std::string_view t, std::vector<span>& out) {
  const std::size_t n = t.size();
  if (n < 11) return;
  for (std::size_t i = 0; i + 11 <= n; ++i) {
    if (!is_digit(byte_at(t, i))) continue;
    const char* s = t.data() + i;
    const bool shape = is_digit(s[1]) && is_digit(s[2]) && s[3] == '-' && is_digit(s[4]) && is_digit(s[5]) &&
                       s[6] == '-' && is_digit(s[7]) && is_digit(s[8]) && is_digit(s[9]) && is_digit(s[10]);
    if (shape && number_start(t, i) && number_end(t, i + 11) && !(i > 0 && t[i - 1] == '-')) {
      const int area = (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
      const int group = (s[4] - '0') * 10 + (s[5] - '0');
      const int serial = (s[7] - '0') * 1000 + (s[8] - '0') * 100 + (s[9] - '0') * 10 + (s[10] - '0');
      if (ssn_ok(area, group, serial)) out.push_back(span{pii_type::ssn, i, i + 11});
      i += 10;
      continue;
    }
    while (i + 1 < n && is_digit(byte_at(t, i + 1))) ++i;
  }
}

}  // namespace loom::pii::detail
