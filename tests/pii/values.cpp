// The generators of values.hpp. Over 500 lines because it is one class: the
// name/domain/IBAN tables and the 16 generators share them; split, each half
// would need the tables in a header of their own.
#include "tests/pii/values.hpp"

#include <phonenumbers/phonenumberutil.h>

#include <array>
#include <cstdio>
#include <iterator>

namespace loom::pii::test {
namespace {

namespace pn = i18n::phonenumbers;

constexpr std::string_view base62 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
constexpr std::string_view base64url = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr std::string_view base64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view upper_digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

const char* const first_names[] = {
    "james", "mary", "john", "patricia", "robert", "jennifer", "michael", "linda", "william", "elizabeth", "david",
    "barbara", "richard", "susan", "joseph", "jessica", "thomas", "sarah", "charles", "karen", "daniel", "lisa",
    "matthew", "nancy", "anthony", "betty", "mark", "sandra", "steven", "ashley", "paul", "emily", "andrew", "donna",
    "kevin", "michelle", "brian", "amanda", "george", "melissa", "zoe", "li", "wei", "anna", "lukas", "sofia",
    "mateo", "chloe", "yuki", "omar", "fatima", "ivan", "olga", "pierre", "marie", "jose", "lucia", "ahmed", "priya"};
const char* const last_names[] = {
    "smith", "johnson", "williams", "brown", "jones", "garcia", "miller", "davis", "rodriguez", "martinez",
    "hernandez", "lopez", "gonzalez", "wilson", "anderson", "taylor", "moore", "jackson", "martin", "lee", "thompson",
    "white", "harris", "clark", "lewis", "walker", "young", "allen", "king", "wright", "scott", "nguyen", "hill",
    "mueller", "schmidt", "schneider", "fischer", "dubois", "lefebvre", "rossi", "russo", "kowalski", "nowak",
    "ivanov", "tanaka", "suzuki", "kim", "park", "chen", "wang", "singh", "kumar", "silva", "santos", "o-neil"};
const char* const domains[] = {
    "gmail.com", "yahoo.com", "hotmail.com", "outlook.com", "example.com", "example.org", "example.net",
    "mail.example.co.uk", "uni-heidelberg.de", "posteo.de", "proton.me", "icloud.com", "gmx.net", "web.de",
    "free.fr", "orange.fr", "libero.it", "yandex.ru", "qq.com", "naver.com", "cs.university.edu", "acme-corp.biz",
    "lists.debian.org", "company.io", "startup.dev", "xn--mller-kva.de", "shop.example.info", "b2b.example.museum"};
const char* const words[] = {"user", "account", "connection", "pool", "size", "default", "handler", "request",
                             "buffer", "index", "config", "value", "session", "token", "manager", "factory"};

template <class T, std::size_t N>
const T& pick(std::mt19937_64& rng, const T (&a)[N]) {
  return a[rng() % N];
}

std::string b64url_encode(std::string_view in) {
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) out += base64url[(acc >> (bits -= 6)) & 63];
  }
  if (bits > 0) out += base64url[(acc << (6 - bits)) & 63];
  return out;
}

std::string luhn_complete(const std::string& body) {  // appends the check digit
  for (char d = '0'; d <= '9'; ++d)
    if (reference_luhn(body + d)) return body + d;
  return body;
}

// Groups of four, the remainder folded into the last group (13 -> 4-4-5, 17 -> 4-4-4-5);
// Amex 4-6-5 and Diners 4-6-4 as printed.
std::string group_card(const std::string& d, char sep) {
  std::vector<std::size_t> g;
  if (d.size() == 15 || d.size() == 14) {
    g = {4, 6, d.size() - 10};
  } else {
    std::size_t left = d.size();
    while (left > 0) {
      const std::size_t take = left >= 7 || left == 4 ? 4 : left;
      g.push_back(take);
      left -= take;
    }
  }
  std::string out;
  std::size_t pos = 0;
  for (std::size_t k = 0; k < g.size(); ++k) {
    if (k) out += sep;
    out += d.substr(pos, g[k]);
    pos += g[k];
  }
  return out;
}

// BBAN layouts of the IBAN registry: n digits, a upper-case letters, c either.
struct iban_country {
  const char* code;
  const char* layout;
};
const iban_country iban_countries[] = {
    {"DE", "8n10n"}, {"GB", "4a6n8n"}, {"FR", "5n5n11c2n"}, {"NL", "4a10n"}, {"BE", "3n7n2n"}, {"CH", "5n12c"},
    {"ES", "4n4n1n1n10n"}, {"IT", "1a5n5n12c"}, {"AT", "5n11n"}, {"PL", "8n16n"}, {"PT", "4n4n11n2n"},
    {"SE", "3n16n1n"}, {"NO", "4n6n1n"}, {"DK", "4n9n1n"}, {"FI", "3n11n"}, {"IE", "4a6n8n"}, {"LU", "3n13c"},
    {"CZ", "4n6n10n"}, {"SA", "2n18c"}, {"TR", "5n1n16c"}, {"BR", "8n5n10n1a1c"}, {"MT", "4a5n18c"},
    {"GR", "3n4n16c"}, {"RO", "4a16c"}, {"HU", "3n4n1n15n1n"}, {"LT", "5n11n"}, {"HR", "7n10n"}, {"SI", "5n8n2n"},
    {"AE", "3n16n"}, {"IL", "3n3n13n"}, {"KW", "4a22c"}, {"QA", "4a21c"}};

std::string group4(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); i += 4) {
    if (i) out += ' ';
    out += s.substr(i, 4);
  }
  return out;
}

}  // namespace

bool reference_luhn(const std::string& digits) {
  int sum = 0;
  for (std::size_t k = 0; k < digits.size(); ++k) {
    int d = digits[digits.size() - 1 - k] - '0';
    if (k % 2 == 1) d = d * 2 > 9 ? d * 2 - 9 : d * 2;
    sum += d;
  }
  return sum % 10 == 0;
}

int reference_iban_mod97(const std::string& compact) {
  const std::string moved = compact.substr(4) + compact.substr(0, 4);
  std::string num;
  for (char c : moved) num += (c >= 'A' && c <= 'Z') ? std::to_string(c - 'A' + 10) : std::string(1, c);
  int r = 0;
  for (char c : num) r = (r * 10 + (c - '0')) % 97;
  return r;
}

std::string value_generator::chars(std::string_view alphabet, std::size_t n) {
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s += alphabet[rng_() % alphabet.size()];
  return s;
}

value value_generator::make(pii_type t) {
  switch (t) {
    case pii_type::email: return email();
    case pii_type::phone: return phone();
    case pii_type::ipv4: return ipv4();
    case pii_type::ipv6: return ipv6();
    case pii_type::credit_card: return card();
    case pii_type::iban: return iban();
    case pii_type::ssn: return ssn();
    case pii_type::secret: return secret();
  }
  return {};
}

value value_generator::near_miss(pii_type t) {
  switch (t) {
    case pii_type::email: return bad_email();
    case pii_type::phone: return bad_phone();
    case pii_type::ipv4: return bad_ipv4();
    case pii_type::ipv6: return bad_ipv6();
    case pii_type::credit_card: return bad_card();
    case pii_type::iban: return bad_iban();
    case pii_type::ssn: return bad_ssn();
    case pii_type::secret: return bad_secret();
  }
  return {};
}

// ---- positives -------------------------------------------------------------

value value_generator::email() {
  const std::string f = pick(rng_, first_names), l = pick(rng_, last_names), d = pick(rng_, domains);
  std::string local;
  switch (below(8)) {
    case 0: local = f + "." + l; break;
    case 1: local = f + "_" + l; break;
    case 2: local = f + l + digits(1 + below(3)); break;
    case 3: local = f.substr(0, 1) + "." + l; break;
    case 4: local = f + "." + l + "+" + pick(rng_, words); break;
    case 5: local = l + "." + f + digits(2); break;
    case 6: local = f; local[0] = static_cast<char>(local[0] - 32); local += "." + l; break;
    default: local = f + "-" + l + "%" + digits(1); break;
  }
  return {local + "@" + d, "email"};
}

value value_generator::phone() {
  static const char* const regions[] = {"US", "US", "US", "US", "CA", "GB", "DE", "FR", "IN", "JP",
                                        "BR", "AU", "ES", "IT", "NL", "MX", "CH", "SE", "ZA", "KR"};
  const pn::PhoneNumberUtil& u = *pn::PhoneNumberUtil::GetInstance();
  for (;;) {
    const std::string region = pick(rng_, regions);
    const auto type = below(2) ? pn::PhoneNumberUtil::FIXED_LINE : pn::PhoneNumberUtil::MOBILE;
    pn::PhoneNumber ex;
    if (!u.GetExampleNumberForType(region, type, &ex)) continue;
    std::string nsn;
    u.GetNationalSignificantNumber(ex, &nsn);
    const std::size_t k = std::min<std::size_t>(nsn.size() - 3, 6);  // keep the area/operator prefix
    pn::PhoneNumber num;
    bool ok = false;
    for (int tries = 0; tries < 30 && !ok; ++tries) {
      const std::string cand = nsn.substr(0, nsn.size() - k) + digits(k);
      ok = u.Parse(cand, region, &num) == pn::PhoneNumberUtil::NO_PARSING_ERROR && u.IsValidNumber(num);
    }
    if (!ok) continue;
    std::string out;
    const bool nanp = region == "US" || region == "CA";
    const std::size_t style = below(nanp ? 6 : 2);
    if (style == 0) {
      u.Format(num, pn::PhoneNumberUtil::INTERNATIONAL, &out);
    } else if (style == 1) {
      u.Format(num, pn::PhoneNumberUtil::E164, &out);
    } else {
      u.GetNationalSignificantNumber(num, &out);  // NANP: 10 digits
      const std::string a = out.substr(0, 3), b = out.substr(3, 3), c = out.substr(6);
      out = style == 2 ? "(" + a + ") " + b + "-" + c
          : style == 3 ? a + "-" + b + "-" + c
          : style == 4 ? a + "." + b + "." + c
                       : "+1 (" + a + ") " + b + "-" + c;
    }
    return {out, "phone_" + region};
  }
}

value value_generator::ipv4() {
  std::array<std::size_t, 4> o{below(256), below(256), below(256), below(256)};
  const std::size_t kind = below(4);  // a quarter each in 10/8 and 192.168/16
  if (kind == 1) o[0] = 10;
  if (kind == 2) o[0] = 192, o[1] = 168;
  return {std::to_string(o[0]) + "." + std::to_string(o[1]) + "." + std::to_string(o[2]) + "." + std::to_string(o[3]),
          kind == 1 ? "ipv4_10" : kind == 2 ? "ipv4_192_168" : "ipv4"};
}

value value_generator::ipv6() {
  std::array<unsigned, 8> g{};
  for (auto& x : g) x = static_cast<unsigned>(below(65536));
  const std::size_t kind = below(10);
  if (kind == 0) g = {0xfe80, 0, 0, 0, g[4], g[5], g[6], g[7]};
  if (kind == 1) g[0] = 0x2001, g[1] = 0x0db8;
  const bool embedded = kind == 2 || kind == 3;
  if (kind == 2) g = {0, 0, 0, 0, 0, 0xffff, g[6], g[7]};
  if (kind == 3) g = {0x64, 0xff9b, 0, 0, 0, 0, g[6], g[7]};
  if (kind >= 4 && below(2)) {  // a run of zeros to compress
    const std::size_t at = below(7), len = 1 + below(std::min<std::size_t>(4, 8 - at));
    for (std::size_t i = at; i < at + len; ++i) g[i] = 0;
  }
  const std::size_t ng = embedded ? 6 : 8;
  // Longest zero run among the hex groups (length >= 1 may be compressed).
  std::size_t best = 0, best_at = 0;
  for (std::size_t i = 0; i < ng;) {
    std::size_t j = i;
    while (j < ng && g[j] == 0) ++j;
    if (j - i > best) best = j - i, best_at = i;
    i = j > i ? j : i + 1;
  }
  const bool compress = best > 0 && (embedded || below(4) != 0);
  const bool upper = below(5) == 0, pad = below(6) == 0;
  std::string s;
  char buf[8];
  for (std::size_t i = 0; i < ng; ++i) {
    if (compress && i == best_at) {
      s += "::";
      i += best - 1;
      continue;
    }
    if (!s.empty() && s.back() != ':') s += ':';
    std::snprintf(buf, sizeof buf, pad ? (upper ? "%04X" : "%04x") : (upper ? "%X" : "%x"), g[i]);
    s += buf;
  }
  if (embedded) {
    if (s.back() != ':') s += ':';
    s += std::to_string(g[6] >> 8) + "." + std::to_string(g[6] & 255) + "." + std::to_string(g[7] >> 8) + "." +
         std::to_string(g[7] & 255);
  }
  return {s, embedded ? "ipv6_embedded_ipv4" : compress ? "ipv6_compressed" : "ipv6_full"};
}

value value_generator::card() {
  struct network {
    const char* name;
    std::size_t len;
  };
  static const network nets[] = {{"visa", 16}, {"visa", 16}, {"visa", 13}, {"visa", 19}, {"mastercard", 16},
                                 {"mastercard2", 16}, {"amex", 15}, {"discover", 16}, {"jcb", 16},
                                 {"diners", 14}, {"maestro", 19}, {"maestro", 16}, {"unionpay", 17},
                                 {"unionpay", 18}, {"mir", 16}};
  const network& n = pick(rng_, nets);
  const std::string name = n.name;
  std::string p;
  if (name == "visa") p = "4";
  else if (name == "mastercard") p = "5" + std::to_string(1 + below(5));
  else if (name == "mastercard2") p = std::to_string(2221 + below(500));
  else if (name == "amex") p = below(2) ? "34" : "37";
  else if (name == "discover") p = below(2) ? "6011" : "65";
  else if (name == "jcb") p = std::to_string(3528 + below(62));
  else if (name == "diners") p = below(2) ? "36" : "30" + std::to_string(below(6));
  else if (name == "maestro") p = below(2) ? "6759" : "5018";
  else if (name == "unionpay") p = "62";
  else p = "220" + std::to_string(below(5));
  const std::string d = luhn_complete(p + digits(n.len - 1 - p.size()));
  const std::size_t style = below(3);
  return {style == 0 ? d : group_card(d, style == 1 ? ' ' : '-'), name};
}

value value_generator::iban() {
  const iban_country& c = pick(rng_, iban_countries);
  std::string bban;
  for (const char* l = c.layout; *l;) {
    std::size_t count = 0;
    while (*l >= '0' && *l <= '9') count = count * 10 + static_cast<std::size_t>(*l++ - '0');
    const char kind = *l++;
    bban += kind == 'n' ? digits(count) : kind == 'a' ? chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ", count)
                                                        : chars(upper_digits, count);
  }
  const int r = reference_iban_mod97(std::string(c.code) + "00" + bban);
  const int check = 98 - r;
  std::string iban = std::string(c.code) + (check < 10 ? "0" : "") + std::to_string(check) + bban;
  return {below(2) ? iban : group4(iban), std::string("iban_") + c.code};
}

value value_generator::ssn() {
  int area;
  do area = 1 + static_cast<int>(below(899));
  while (area == 666);
  char buf[16];
  std::snprintf(buf, sizeof buf, "%03d-%02d-%04d", area, 1 + static_cast<int>(below(99)),
                1 + static_cast<int>(below(9999)));
  return {buf, "ssn"};
}

value value_generator::secret() {
  switch (below(13)) {
    case 0: return {std::string(below(2) ? "AK" "IA" : "AS" "IA") + chars("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567", 16), "aws_key_id"};
    case 1: return {std::string("gh") + "pousr"[below(5)] + "_" + chars(base62, 36), "github_token"};
    case 2: return {std::string("github") + "_pat_" + chars(base62, 22) + "_" + chars(base62, 59), "github_pat"};
    case 3: return {std::string("gl") + "pat-" + chars(base64url, 20), "gitlab_pat"};
    case 4:
      return {std::string("xo") + "x" + "bap"[below(3)] + "-" + digits(12) + "-" + digits(13) + "-" + chars(base62, 24),
              "slack_token"};
    case 5: return {std::string(below(2) ? "sk" "_live_" : "rk" "_live_") + chars(base62, below(2) ? 24 : 99), "stripe_key"};
    case 6: return {std::string("AI") + "za" + chars(base64url, 35), "google_api_key"};
    case 7: return {std::string("np") + "m_" + chars(base62, 36), "npm_token"};
    case 8: {
      const std::string header = R"({"alg":"HS256","typ":"JWT"})";
      const std::string payload = R"({"sub":")" + digits(10) + R"(","name":")" + pick(rng_, first_names) +
                                  R"(","iat":)" + digits(10) + "}";
      return {b64url_encode(header) + "." + b64url_encode(payload) + "." + chars(base64url, 43), "jwt"};
    }
    case 9: {
      static const char* const labels[] = {"RSA PRIVATE KEY", "EC PRIVATE KEY", "PRIVATE KEY", "OPENSSH PRIVATE KEY",
                                           "ENCRYPTED PRIVATE KEY"};
      const std::string label = pick(rng_, labels);
      std::string s = "-----BEGIN " + label + "-----\n";
      for (std::size_t i = 0, lines = 4 + below(20); i < lines; ++i) s += chars(base64, 64) + "\n";
      s += chars(base64, 4 + 4 * below(15)) + "==\n-----END " + label + "-----";
      return {s, "private_key"};
    }
    case 10: return {chars(base64, 40), "aws_secret_like_base64_40"};
    default: return {chars(base62, 32 + below(33)), "random_base62_32_64"};
  }
}

// ---- near misses -----------------------------------------------------------

value value_generator::bad_email() {
  const std::string f = pick(rng_, first_names), l = pick(rng_, last_names), d = pick(rng_, domains);
  const std::string host = d.substr(0, d.rfind('.'));
  switch (below(12)) {
    case 0: return {f + "." + l + "@" + host.substr(host.rfind('.') + 1), "no_tld"};
    case 1: return {f + ".." + l + "@" + d, "double_dot_local"};
    case 2: return {f + "@@" + d, "double_at"};
    case 3: return {f + "." + l + ".@" + d, "trailing_dot_local"};
    case 4: return {f + "@" + host + ".." + d.substr(d.rfind('.') + 1), "double_dot_domain"};
    case 5: return {f + "@-" + d, "hyphen_label"};
    case 6: return {f + "@" + host + ".c", "one_letter_tld"};
    case 7: return {f + "@" + host + "." + digits(3), "numeric_tld"};
    case 8: return {f + " @ " + d, "spaced_at"};
    case 9: return {f + "@" + host + "_x.com", "underscore_domain"};
    case 10: return {pick(rng_, words) + std::string("@2x.png"), "image_name"};
    default: return {"@" + f, "handle"};
  }
}

value value_generator::bad_phone() {
  const pn::PhoneNumberUtil& u = *pn::PhoneNumberUtil::GetInstance();
  for (;;) {
    std::string s;
    std::string kind;
    switch (below(6)) {
      case 0: s = "(" + std::to_string(below(2)) + digits(2) + ") " + digits(3) + "-" + digits(4); kind = "bad_area"; break;
      case 1: s = "555-01" + digits(2); kind = "seven_digits"; break;
      case 2: s = "+1 " + std::to_string(below(2)) + digits(2) + "-" + digits(3) + "-" + digits(4); kind = "bad_area_intl"; break;
      case 3: s = "+44 20 " + digits(4); kind = "truncated_intl"; break;
      case 4: s = "20" + digits(2) + "-" + std::string(1, static_cast<char>('0' + below(2))) + std::to_string(1 + below(9)) +
                  "-" + std::to_string(10 + below(18));
        kind = "date";
        break;
      default: s = std::to_string(below(24)) + ":" + std::to_string(10 + below(50)) + ":" + std::to_string(10 + below(50));
        kind = "time";
        break;
    }
    pn::PhoneNumber num;
    if (u.Parse(s, "US", &num) == pn::PhoneNumberUtil::NO_PARSING_ERROR && u.IsValidNumber(num)) continue;
    return {s, kind};
  }
}

value value_generator::bad_ipv4() {
  auto o = [&] { return std::to_string(below(256)); };
  switch (below(7)) {
    case 0: return {std::to_string(256 + below(744)) + "." + o() + "." + o() + "." + o(), "octet_over_255"};
    case 1: return {o() + "." + o() + "." + o(), "three_octets"};
    case 2: return {o() + "." + o() + "." + o() + "." + o() + "." + o(), "five_octets"};
    case 3: return {"0" + std::to_string(1 + below(9)) + "." + o() + "." + o() + "." + o(), "leading_zero"};
    case 4: return {"version " + o() + "." + o() + "." + o() + "." + o(), "version"};
    case 5: return {std::to_string(below(10)) + "." + std::to_string(below(30)) + "." + std::to_string(below(10)), "semver"};
    default: return {o() + "." + o() + "." + o() + "." + std::to_string(300 + below(700)), "last_octet_over_255"};
  }
}

value value_generator::bad_ipv6() {
  auto h = [&] { return chars("0123456789abcdef", 1 + below(4)); };
  switch (below(8)) {
    case 0: return {std::to_string(below(24)) + ":" + std::to_string(10 + below(50)), "time"};
    case 1: return {std::to_string(below(24)) + ":" + std::to_string(10 + below(50)) + ":" + std::to_string(10 + below(50)), "time_seconds"};
    case 2: {
      std::string m = chars("0123456789abcdef", 2);
      for (int i = 0; i < 5; ++i) m += ":" + chars("0123456789abcdef", 2);
      return {m, "mac"};
    }
    case 3: {
      std::string s = h();
      for (int i = 0; i < 8; ++i) s += ":" + h();
      return {s, "nine_groups"};
    }
    case 4: {
      std::string s = h();
      for (int i = 0; i < 6; ++i) s += ":" + h();
      return {s, "seven_groups"};
    }
    case 5: return {h() + "::" + h() + "::" + h(), "two_compressions"};
    case 6: return {chars("123456789abcdef", 5) + "::" + h(), "five_digit_group"};
    default: return {std::string(below(2) ? "std" : "boost") + "::" + pick(rng_, words) + "_" + pick(rng_, words), "cpp_scope"};
  }
}

value value_generator::bad_card() {
  switch (below(4)) {
    case 0:
    case 1: {  // a real network's prefix and length, wrong check digit
      std::string only;
      for (char c : card().text)
        if (c >= '0' && c <= '9') only += c;
      only.back() = static_cast<char>('0' + (only.back() - '0' + 1 + below(9)) % 10);
      return {below(2) ? only : group_card(only, ' '), "luhn_fails"};
    }
    case 2: {  // Luhn-valid, but no network starts with 1, 7 or 8
      const std::string d = luhn_complete(std::string(1, "178"[below(3)]) + digits(14));
      return {below(2) ? d : group_card(d, '-'), "unknown_issuer"};
    }
    default: {  // Luhn-valid Visa prefix with a length Visa never uses
      const std::string d = luhn_complete("4" + digits(below(2) ? 10 : 13));
      return {d, "bad_length"};
    }
  }
}

value value_generator::bad_iban() {
  const value good = iban();
  std::string c;
  for (char ch : good.text)
    if (ch != ' ') c += ch;
  switch (below(4)) {
    case 0: {  // other check digits
      int check = std::stoi(c.substr(2, 2));
      int other;
      do other = 2 + static_cast<int>(below(97));
      while (other == check);
      c = c.substr(0, 2) + (other < 10 ? "0" : "") + std::to_string(other) + c.substr(4);
      return {c, "bad_check_digits"};
    }
    case 1: {  // one BBAN digit changed
      for (std::size_t i = c.size(); i-- > 4;)
        if (c[i] >= '0' && c[i] <= '9') {
          c[i] = static_cast<char>('0' + (c[i] - '0' + 1 + below(9)) % 10);
          break;
        }
      return {below(2) ? c : group4(c), "bad_digit"};
    }
    case 2: c.pop_back(); return {c, "too_short"};
    default: c[0] = 'Q'; c[1] = "QXZ"[below(3)]; return {c, "unknown_country"};
  }
}

value value_generator::bad_ssn() {
  char buf[24];
  const int g = 1 + static_cast<int>(below(99)), s = 1 + static_cast<int>(below(9999));
  switch (below(7)) {
    case 0: std::snprintf(buf, sizeof buf, "000-%02d-%04d", g, s); return {buf, "area_000"};
    case 1: std::snprintf(buf, sizeof buf, "666-%02d-%04d", g, s); return {buf, "area_666"};
    case 2: std::snprintf(buf, sizeof buf, "9%02d-%02d-%04d", static_cast<int>(below(100)), g, s); return {buf, "area_9xx"};
    case 3: std::snprintf(buf, sizeof buf, "%03d-00-%04d", 1 + static_cast<int>(below(665)), s); return {buf, "group_00"};
    case 4: std::snprintf(buf, sizeof buf, "%03d-%02d-0000", 1 + static_cast<int>(below(665)), g); return {buf, "serial_0000"};
    case 5: std::snprintf(buf, sizeof buf, "%03d-%03d-%03d", 1 + static_cast<int>(below(665)), g, s % 1000); return {buf, "grouping_3_3_3"};
    default: std::snprintf(buf, sizeof buf, "%03d %02d %04d", 1 + static_cast<int>(below(665)), g, s); return {buf, "spaces"};
  }
}

value value_generator::bad_secret() {
  switch (below(8)) {
    case 0: return {chars("0123456789abcdef", 40), "sha1_hex"};
    case 1: return {chars("0123456789abcdef", 64), "sha256_hex"};
    case 2: {
      const std::string x = "0123456789abcdef";
      return {chars(x, 8) + "-" + chars(x, 4) + "-4" + chars(x, 3) + "-a" + chars(x, 3) + "-" + chars(x, 12), "uuid"};
    }
    case 3: return {std::string("AK") + "IA" + chars(upper_digits, 12), "aws_too_short"};
    case 4: return {std::string("gh") + "p_" + chars(base62, 8), "github_too_short"};
    case 5: return {std::string("sk") + "_live_" + chars(base62, 8), "stripe_too_short"};
    case 6: {
      std::string id = "get";
      for (int i = 0; i < 4; ++i) {
        std::string w = pick(rng_, words);
        w[0] = static_cast<char>(w[0] - 32);
        id += w;
      }
      return {id + digits(1), "camel_case_identifier"};
    }
    default: {
      std::string id = pick(rng_, words);
      for (int i = 0; i < 4; ++i) id += std::string("_") + pick(rng_, words);
      return {id, "snake_case_identifier"};
    }
  }
}

}  // namespace loom::pii::test
