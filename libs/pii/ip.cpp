// IPv4 dotted quads and IPv6 addresses in every RFC 4291 (2.2) text form:
// eight 1-4 digit hex groups, one "::" for a run of zero groups, and an
// embedded IPv4 as the last 32 bits ("::ffff:192.0.2.1"). Zone ids ("%eth0"),
// prefix lengths ("/64") and ports stay outside the span.
// Not flagged: "1.2.3.4.5", octets over 255 or with leading zeros, a quad
// right after "version "; times ("12:30:45"), MACs, hex words without a digit
// ("dead::beef", C++ "::add"), a bare "::".
#include "libs/pii/detectors.hpp"

#include <cstring>

namespace loom::pii::detail {
namespace {

// One octet at t[i..]: 0-255 without leading zeros. Advances i.
bool octet(std::string_view t, std::size_t& i) {
  const std::size_t s = i;
  int v = 0;
  while (i < t.size() && is_digit(byte_at(t, i)) && i - s < 4) v = v * 10 + (t[i++] - '0');
  const std::size_t len = i - s;
  return len >= 1 && len <= 3 && v <= 255 && !(len > 1 && t[s] == '0');
}

// A dotted quad starting at t[i]: its end, or 0.
std::size_t quad_end(std::string_view t, std::size_t i) {
  for (int k = 0; k < 4; ++k) {
    if (k > 0) {
      if (i >= t.size() || t[i] != '.') return 0;
      ++i;
    }
    if (!octet(t, i)) return 0;
  }
  return i;
}

bool after_version_word(std::string_view t, std::size_t i) {
  constexpr std::string_view word = "version ";
  if (i < word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k)
    if ((t[i - word.size() + k] | 0x20) != word[k]) return false;
  return true;
}

bool is_v6char(unsigned char c) { return is_hex(c) || c == ':' || c == '.'; }

}  // namespace

bool ipv4_ok(std::string_view s) { return !s.empty() && quad_end(s, 0) == s.size(); }

bool ipv6_ok(std::string_view s) {
  const std::size_t n = s.size();
  std::size_t i = 0;
  int groups = 0;
  bool compressed = false;
  if (n >= 2 && s[0] == ':' && s[1] == ':') {
    compressed = true;
    i = 2;
  } else if (n == 0 || s[0] == ':') {
    return false;
  }
  while (i < n) {
    std::size_t j = i;
    while (j < n && is_hex(byte_at(s, j))) ++j;
    if (j < n && s[j] == '.') {  // embedded IPv4: the last 32 bits
      if (!ipv4_ok(s.substr(i))) return false;
      groups += 2;
      i = n;
      break;
    }
    if (j == i || j - i > 4) return false;
    ++groups;
    i = j;
    if (i == n) break;
    if (s[i] != ':') return false;
    if (i + 1 < n && s[i + 1] == ':') {
      if (compressed) return false;
      compressed = true;
      i += 2;
      continue;
    }
    if (++i == n) return false;  // trailing single ':'
  }
  return compressed ? groups <= 7 : groups == 8;
}

void find_ipv4(std::string_view t, std::vector<span>& out) {
  const std::size_t n = t.size();
  for (std::size_t i = 0; i < n; ++i) {
    if (!is_digit(byte_at(t, i))) continue;
    if (i > 0 && (is_word(byte_at(t, i - 1)) || t[i - 1] == '.')) {
      while (i + 1 < n && is_digit(byte_at(t, i + 1))) ++i;
      continue;
    }
    const std::size_t end = quad_end(t, i);
    if (end == 0) continue;
    const bool more = end < n && (is_word(byte_at(t, end)) ||
                                  (t[end] == '.' && end + 1 < n && is_alnum(byte_at(t, end + 1))));
    if (!more && !after_version_word(t, i)) out.push_back(span{pii_type::ipv4, i, end});
    i = end - 1;
  }
}

void find_ipv6(std::string_view t, std::vector<span>& out) {
  const char* base = t.data();
  const std::size_t n = t.size();
  std::size_t pos = 0;
  while (pos < n) {
    const void* p = std::memchr(base + pos, ':', n - pos);
    if (!p) break;
    const std::size_t c = static_cast<std::size_t>(static_cast<const char*>(p) - base);
    std::size_t s = c, e = c + 1;
    while (s > 0 && is_v6char(byte_at(t, s - 1))) --s;
    while (e < n && is_v6char(byte_at(t, e))) ++e;
    pos = e;
    if (e < n && is_word(byte_at(t, e))) continue;
    if (e - s >= 2 && t[s] == ':' && t[s + 1] != ':') {
      ++s;  // "addr:fe80::1": the colon is the boundary
    } else if (s > 0 && is_word(byte_at(t, s - 1))) {
      continue;  // "sha256:...", "Foo::bar"
    }
    while (s < e && t[s] == '.') ++s;
    if (e > s && t[e - 1] == '.') --e;                        // sentence end
    if (e - s >= 2 && t[e - 1] == ':' && t[e - 2] != ':') --e;  // "at fe80::1: ..."
    const std::string_view a = t.substr(s, e - s);
    if (a.size() < 3 || !ipv6_ok(a)) continue;
    bool digit = false;
    for (unsigned char ch : a) digit |= is_digit(ch);
    if (digit) out.push_back(span{pii_type::ipv6, s, e});
  }
}

}  // namespace loom::pii::detail
