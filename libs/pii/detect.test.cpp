#include "libs/pii/pii.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace loom::pii;

namespace {
const detector& default_detector() {
  static const detector d = [] {
    auto r = detector::make();
    REQUIRE(r.ok());
    return std::move(r).value();
  }();
  return d;
}
}  // namespace

TEST_CASE("type names and placeholders round-trip") {
  for (pii_type t : all_types) CHECK(type_from_string(to_string(t)) == t);
  CHECK(to_string(pii_type::credit_card) == "credit_card");
  CHECK(placeholder(pii_type::credit_card) == "<CREDIT_CARD>");
  CHECK(placeholder(pii_type::ipv6) == "<IPV6>");
  CHECK_FALSE(type_from_string("name").has_value());
}

TEST_CASE("an unknown phone region is refused when the detector is made") {
  options o;
  o.phone_region = "ZZ";
  auto d = detector::make(o);
  REQUIRE_FALSE(d.ok());
  CHECK(d.code() == loom::errc::invalid_argument);
  o.enabled[static_cast<std::size_t>(pii_type::phone)] = false;
  CHECK(detector::make(o).ok());
}

TEST_CASE("the detector reports every type in order with byte offsets") {
  const std::string text =
      "Mail jane@example.com, call (650) 253-0000, host 10.1.2.3 or 2001:db8::7, card 4111 1111 1111 1111, "
      "IBAN DE89370400440532013000, SSN 123-45-6789, key AKIA" "IOSFODNN7EXAMPLE.";
  const auto spans = default_detector().find(text);
  std::vector<std::pair<pii_type, std::string>> got;
  for (const auto& s : spans) got.emplace_back(s.type, text.substr(s.start, s.end - s.start));
  const std::vector<std::pair<pii_type, std::string>> want = {
      {pii_type::email, "jane@example.com"},
      {pii_type::phone, "(650) 253-0000"},
      {pii_type::ipv4, "10.1.2.3"},
      {pii_type::ipv6, "2001:db8::7"},
      {pii_type::credit_card, "4111 1111 1111 1111"},
      {pii_type::iban, "DE89370400440532013000"},
      {pii_type::ssn, "123-45-6789"},
      {pii_type::secret, "AKIA" "IOSFODNN7EXAMPLE"},
  };
  CHECK(got == want);
}

TEST_CASE("overlapping candidates resolve by the fixed rank order") {
  const detector& d = default_detector();
  // IBAN digits hold a phone- and card-like run; the IBAN wins.
  auto s = d.find("DE89 3704 0044 0532 0130 00");
  REQUIRE(s.size() == 1);
  CHECK(s[0].type == pii_type::iban);
  // An IPv4 is no phone; an embedded IPv4 belongs to its IPv6.
  s = d.find("192.168.100.200 and ::ffff:192.0.2.1");
  REQUIRE(s.size() == 2);
  CHECK(s[0].type == pii_type::ipv4);
  CHECK(s[1].type == pii_type::ipv6);
  CHECK(s[1].start == 20);
  // A high-entropy local part stays part of its e-mail address.
  s = d.find("x7Kq9Zp2Lm4Nv8Rt3Wy6Bc1Df5@example.com");
  REQUIRE(s.size() == 1);
  CHECK(s[0].type == pii_type::email);
  // The same input gives the same spans.
  const std::string text = "a@b.co 4111111111111111 1.2.3.4 (650) 253-0000";
  CHECK(d.find(text) == d.find(text));
}

TEST_CASE("disabled types are not reported") {
  options o;
  o.enabled.fill(false);
  o.enabled[static_cast<std::size_t>(pii_type::ipv4)] = true;
  auto d = detector::make(o);
  REQUIRE(d.ok());
  const auto s = d->find("jane@example.com 10.0.0.1");
  REQUIRE(s.size() == 1);
  CHECK(s[0] == span{pii_type::ipv4, 17, 25});
}

TEST_CASE("the redactor writes typed placeholders and counts per type") {
  const std::string text = "to a@b.com and c@d.org from 10.0.0.1\n";
  const auto r = redact(default_detector(), text);
  CHECK(r.text == "to <EMAIL> and <EMAIL> from <IPV4>\n");
  CHECK(r.counts[static_cast<std::size_t>(pii_type::email)] == 2);
  CHECK(r.counts[static_cast<std::size_t>(pii_type::ipv4)] == 1);
  CHECK(r.counts[static_cast<std::size_t>(pii_type::phone)] == 0);
  const auto none = redact("nothing here", {});
  CHECK(none.text == "nothing here");
}

TEST_CASE("arbitrary bytes never crash the detector and spans stay in bounds") {
  std::string junk;
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 200000; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const char alphabet[] = "0123456789 .-:@+()/abcdefABCDEF_xyzXYZ=\n\x80\xff";
    junk += (x % 4 == 0) ? static_cast<char>(x >> 32) : alphabet[(x >> 8) % (sizeof alphabet - 1)];
  }
  const auto spans = default_detector().find(junk);
  std::size_t prev_end = 0;
  for (const auto& s : spans) {
    CHECK(s.start >= prev_end);
    CHECK(s.start < s.end);
    CHECK(s.end <= junk.size());
    prev_end = s.end;
  }
}
