// Phone numbers: a byte scan picks candidate runs, libphonenumber decides.
//
// A candidate run starts at '+', '(' or a digit at a word start and runs over
// digits and the punctuation numbers are written with (" -./()"), at most 48
// bytes; spaces cut it into chunks, a chunk running into a letter or a ':'
// (a time) is dropped, and chunks that are dates ("2024-05-01"), dotted quads
// or inside a higher-ranked span (card, SSN, IP, IBAN) split it. From each
// chunk start, the longest sequences of up to six chunks whose digit count can
// be a number go to libphonenumber: 7-17 digits after a '+'; without one, a
// national significant number length of the default region, optionally after
// its trunk prefix (US: 10, or 11 starting with 1). So "Copyright 201.547.4113
// 2007" finds the number without the year. Skipped: candidates inside a
// higher-ranked span, digits after an IBAN head (a broken IBAN is no phone),
// card-shaped runs, dotted quads ("269.241.114.6").
// PhoneNumberMatcher (leniency VALID: valid for its region) decides; only a
// match at the start of the chunks counts, and an unbalanced '(' in front of
// it stays out of the span. Candidates are ASCII: its offsets are byte offsets.
//
// Why the filters: one libphonenumber call costs 40-250 us here (its regexes),
// a byte of prose ~1 ns; at most 2 calls per chunk start and 4 per run bound
// the worst case. A text made of phone numbers runs at ~7,000 numbers/s.
// Fewer than 7 digits are never handed over: short local numbers ("555-0123",
// German 4-digit lines) are not found.
#include "libs/pii/detectors.hpp"

#include <phonenumbers/phonenumbermatch.h>
#include <phonenumbers/phonenumbermatcher.h>
#include <phonenumbers/phonenumberutil.h>

#include <algorithm>
#include <set>

namespace loom::pii::detail {
namespace {

namespace pn = i18n::phonenumbers;

constexpr std::size_t max_candidate = 48;  // "+1 (650) 253-0000 / +1 (650) 253-0001" fits
constexpr int min_digits = 7;               // see above
constexpr int max_intl_digits = 17;         // E.164's 15, and room for a trunk "(0)"
constexpr int matcher_max_tries = 64;       // bounds libphonenumber's work on one candidate
constexpr int max_calls_per_start = 2;      // libphonenumber calls per chunk a number may start at
constexpr int max_calls_per_run = 4;        // and per run: "1 2 3 4 5 ..." must not cost a call per digit
constexpr std::size_t max_chunks = 6;       // "+33 1 23 45 67 89" has six

bool is_punct(unsigned char c) { return c == '-' || c == '.' || c == '/' || c == '(' || c == ')' || c == '+'; }

bool length_ok(const phone_plan& p, std::string_view cand, int digits) {
  if (digits > max_intl_digits) return false;
  if (cand.find('+') != std::string_view::npos) return digits >= min_digits;
  if (p.national_lengths >> digits & 1u) return true;
  const int nd = static_cast<int>(p.national_prefix.size());
  if (nd == 0 || digits <= nd || !(p.national_lengths >> (digits - nd) & 1u)) return false;
  std::size_t k = 0;  // the run must start with the trunk prefix
  for (char c : cand) {
    if (!is_digit(static_cast<unsigned char>(c))) continue;
    if (k == p.national_prefix.size()) break;
    if (c != p.national_prefix[k++]) return false;
  }
  return true;
}

// "269.241.114.6", "(1.2.3.4.5": groups of 1-3 digits joined by dots, three dots or more.
bool dotted_quad(std::string_view cand) {
  int dots = 0, group = 0;
  if (cand.starts_with('(')) cand.remove_prefix(1);
  for (unsigned char c : cand) {
    if (c == '.') {
      ++dots;
      group = 0;
    } else if (!is_digit(c) || ++group > 3) {
      return false;
    }
  }
  return dots >= 3;
}

// Starts with 13-19 digits in groups of 3-6 joined by single spaces or dashes
// (or in one group): a card number, valid or not ("4241 1427 1647 7322 968"
// fails Luhn and holds the valid US number 1 647 732 2968). Never a phone.
bool card_shaped(std::string_view run) {
  int total = 0, group = 0, groups = 0;
  char sep = 0;
  for (std::size_t k = 0; k <= run.size(); ++k) {
    const char c = k < run.size() ? run[k] : '\0';
    if (is_digit(static_cast<unsigned char>(c))) {
      ++group;
      ++total;
      continue;
    }
    const bool single = groups == 0 && c != ' ' && c != '-';  // one unbroken group so far
    if (single) return total >= 13 && total <= 19;
    if ((c != ' ' && c != '-' && c != '\0') || (sep != 0 && c != sep && c != '\0') || group < 3 || group > 6)
      return false;
    ++groups;
    if (total >= 13 && total <= 19 && groups >= 2) return true;
    if (total > 19 || c == '\0') return false;
    sep = c;
    group = 0;
  }
  return false;
}

// "2024-05-01", "01.05.2024", "5/1/2024": three digit groups joined by one of
// "-./", a four-digit year first or last, the other two of 1-2 digits.
bool date_chunk(std::string_view c) {
  int len[3] = {0, 0, 0}, groups = 0;
  char sep = 0;
  for (char ch : c) {
    if (is_digit(static_cast<unsigned char>(ch))) {
      ++len[groups];
    } else if ((ch == '-' || ch == '.' || ch == '/') && (sep == 0 || ch == sep) && len[groups] > 0 && groups < 2) {
      sep = ch;
      ++groups;
    } else {
      return false;
    }
  }
  if (groups != 2) return false;
  const auto small = [](int l) { return l == 1 || l == 2; };
  return (len[0] == 4 && small(len[1]) && small(len[2])) || (small(len[0]) && small(len[1]) && len[2] == 4);
}

// Whether [s, e) lies inside one claimed span.
bool claimed_range(const std::vector<span>& claimed, std::size_t s, std::size_t e) {
  auto it = std::upper_bound(claimed.begin(), claimed.end(), s,
                             [](std::size_t v, const span& c) { return v < c.start; });
  return it != claimed.begin() && std::prev(it)->end >= e;
}

}  // namespace

std::optional<phone_plan> make_phone_plan(const std::string& region) {
  const pn::PhoneNumberUtil& u = *pn::PhoneNumberUtil::GetInstance();
  std::set<std::string> regions;
  u.GetSupportedRegions(&regions);
  if (!regions.count(region)) return std::nullopt;
  phone_plan p;
  p.region = region;
  u.GetNddPrefixForRegion(region, true, &p.national_prefix);
  const int cc = u.GetCountryCodeForRegion(region);
  for (int len = 2; len <= 17; ++len) {  // length-only check: the digits themselves do not matter
    pn::PhoneNumber n;
    n.set_country_code(cc);
    std::uint64_t v = 2;
    for (int k = 1; k < len; ++k) v = v * 10 + 3;
    n.set_national_number(v);
    if (u.IsPossibleNumberWithReason(n) == pn::PhoneNumberUtil::IS_POSSIBLE) p.national_lengths |= 1u << len;
  }
  return p;
}

void find_phones(std::string_view t, const phone_plan& plan, const std::vector<span>& claimed,
                 std::vector<span>& out) {
  const pn::PhoneNumberUtil& util = *pn::PhoneNumberUtil::GetInstance();
  const std::size_t n = t.size();
  struct chunk {
    std::size_t start, end;  // from its first byte to one past its last digit
    int digits;
  };
  chunk chunks[max_candidate];  // a chunk holds a digit and a space at least
  int run_calls = 0;
  // Tries chunks c[0, k) for k from the longest: the first that libphonenumber
  // reads as a number starting at c[0] wins. Returns the end of what was found, or 0.
  const auto try_chunks = [&](const chunk* c, std::size_t count) -> std::size_t {
    int calls = 0;
    for (std::size_t k = std::min(count, max_chunks); k > 0 && calls < max_calls_per_start && run_calls < max_calls_per_run;
         --k) {
      int digits = 0;
      for (std::size_t q = 0; q < k; ++q) digits += c[q].digits;
      const std::string_view cand = t.substr(c[0].start, c[k - 1].end - c[0].start);
      if (digits < min_digits || !length_ok(plan, cand, digits) || dotted_quad(cand) ||
          claimed_range(claimed, c[0].start, c[k - 1].end))
        continue;
      ++calls;
      ++run_calls;
      const std::string window(cand);
      pn::PhoneNumberMatcher m(util, window, plan.region, pn::PhoneNumberMatcher::VALID, matcher_max_tries);
      pn::PhoneNumberMatch match;
      if (!m.HasNext() || !m.Next(&match)) continue;
      std::size_t s = c[0].start + static_cast<std::size_t>(match.start());
      const std::size_t e = s + static_cast<std::size_t>(match.length());
      // Only a number that starts the candidate: one found inside it ("+81 |90-1246-9445")
      // lost its country code or is part of something else.
      if (t.substr(c[0].start, s - c[0].start).find_first_not_of("(+ ") != std::string_view::npos) continue;
      const std::string_view v = t.substr(s, e - s);
      if (v.starts_with('(') && std::count(v.begin(), v.end(), '(') > std::count(v.begin(), v.end(), ')')) {
        ++s;  // "(+44 20 7031 3000" is the number and a bracket of the prose
        while (s < e && t[s] == ' ') ++s;
      }
      out.push_back(span{pii_type::phone, s, e});
      return e;
    }
    return 0;
  };
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char c = byte_at(t, i);
    if (!is_digit(c) && c != '+' && c != '(') continue;
    if (i > 0) {
      const unsigned char p = byte_at(t, i - 1);
      if (is_word(p) || p == '.' || p == '-' || p == '+' || p == '/' || p == ')') {
        while (i + 1 < n && is_digit(byte_at(t, i + 1))) ++i;
        continue;
      }
    }
    // The run, cut into chunks at spaces; a '+' only opens a chunk.
    std::size_t j = i, nc = 0;
    int total = 0;
    chunks[0] = chunk{i, i, 0};
    while (j < n && j - i < max_candidate) {
      const unsigned char d = byte_at(t, j);
      if (is_digit(d)) {
        ++chunks[nc].digits;
        ++total;
        chunks[nc].end = j + 1;
      } else if (d == ' ') {
        if (j + 1 >= n || !(is_digit(byte_at(t, j + 1)) || byte_at(t, j + 1) == '(' || byte_at(t, j + 1) == '+')) break;
        if (t[j - 1] == '.') break;  // "9. 06..." ends a sentence or list item
        if (chunks[nc].digits > 0) chunks[++nc] = chunk{j + 1, j + 1, 0};
      } else if (!is_punct(d) || (d == '+' && j > chunks[nc].start && t[j - 1] != '(')) {
        break;
      }
      ++j;
    }
    if (chunks[nc].digits > 0) ++nc;
    // A chunk running into a letter ("555-0100abc", "3492bis") or a time
    // ("12:30") is no number.
    if (nc > 0 && j < n && (is_alpha(byte_at(t, j)) || t[j] == ':') && j == chunks[nc - 1].end)
      total -= chunks[--nc].digits;
    std::size_t resume = j;
    run_calls = 0;
    if (total >= min_digits && !card_shaped(t.substr(i, nc > 0 ? chunks[nc - 1].end - i : 0)) &&
        !after_iban_groups(t, i)) {
      // Dates, dotted quads and claimed chunks split the run: no number holds one.
      const auto blocked = [&](const chunk& k) {
        const std::string_view v = t.substr(k.start, k.end - k.start);
        return date_chunk(v) || dotted_quad(v) || claimed_range(claimed, k.start, k.end);
      };
      for (std::size_t c0 = 0, stop = 0; c0 < nc; ++c0) {
        if (c0 >= stop) {
          stop = c0;
          while (stop < nc && !blocked(chunks[stop])) ++stop;
        }
        if (c0 == stop) continue;
        if (const std::size_t e = try_chunks(chunks + c0, stop - c0); e != 0) {
          resume = e;
          break;
        }
      }
    }
    i = resume > i ? resume - 1 : i;
  }
}

}  // namespace loom::pii::detail
