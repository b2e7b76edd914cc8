// Tenants in token claims and the principal/tenant/zone name rules (issue #13
// items 10 and 11): what is signed, what old tokens verify as, what is refused.
#include "libs/auth/token.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"

#include <doctest/doctest.h>

using namespace loom::auth;
using loom::errc;

namespace {
const std::string key = "k-0123456789abcdef0123456789abcd";
constexpr std::int64_t t0 = 1'700'000'000;

claims sample() { return claims{"alice@ops", role::operator_, {"eu-west"}, t0 + 3600, 0, t0, "acme"}; }

void put_u64(std::string& out, std::uint64_t v) {
  for (int shift = 56; shift >= 0; shift -= 8) out += static_cast<char>(v >> shift & 0xff);
}
void put_str(std::string& out, std::string_view s) {
  for (int shift = 24; shift >= 0; shift -= 8) out += static_cast<char>(s.size() >> shift & 0xff);
  out += s;
}

// A token in the encoding used before tenants existed (no tenant field),
// signed with `key`: what a deployment's older tokens look like.
std::string pre_tenant_token(const std::string& principal) {
  std::string p;
  put_str(p, principal);
  p += static_cast<char>(2);  // operator
  p += std::string("\0\0\0\1", 4);
  put_str(p, "*");
  put_u64(p, static_cast<std::uint64_t>(t0 + 3600));
  put_u64(p, 0);
  put_u64(p, static_cast<std::uint64_t>(t0));
  std::string signed_part = "lt1." + loom::crypto::base64url_encode(p);
  auto mac = loom::crypto::hmac_sha256(key, signed_part);
  return signed_part + "." + loom::crypto::base64url_encode(loom::crypto::as_view(mac));
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("a token carries its tenant under the signature and an empty tenant verifies as default") {
  auto tok = issue_token(sample(), key);
  REQUIRE(tok.ok());
  auto got = verify_token(*tok, key, {t0});
  REQUIRE(got.ok());
  CHECK(got->tenant == "acme");
  CHECK(got->principal == "alice@ops");

  claims none = sample();
  none.tenant.clear();
  auto plain = verify_token(*issue_token(none, key), key, {t0});
  REQUIRE(plain.ok());
  CHECK(plain->tenant == "default");
  CHECK(tenant_of(none) == "default");

  // Another tenant is another signed payload: the signature of one does not
  // carry over to the other.
  claims other = sample();
  other.tenant = "globex";
  auto tok2 = *issue_token(other, key);
  CHECK(tok2 != *tok);
  std::string spliced = tok2.substr(0, tok2.rfind('.')) + tok->substr(tok->rfind('.'));
  CHECK(verify_token(spliced, key, {t0}).code() == errc::unauthenticated);
}

TEST_CASE("a token minted before tenants existed still verifies, as tenant default") {
  auto got = verify_token(pre_tenant_token("ops-bot"), key, {t0});
  REQUIRE_MESSAGE(got.ok(), got.err().message);
  CHECK(got->principal == "ops-bot");
  CHECK(got->tenant == "default");
  CHECK(got->zones == std::vector<std::string>{"*"});
}

TEST_CASE("an old token whose principal holds a newline is refused at verification") {
  auto got = verify_token(pre_tenant_token("eve\n 42 forged row"), key, {t0});
  REQUIRE_FALSE(got.ok());
  CHECK(got.code() == errc::unauthenticated);
  CHECK(contains(got.err().message, "'\\x0a' at position 4"));
  CHECK_FALSE(contains(got.err().message, "\n"));
}

TEST_CASE("names are 1 to 128 characters of letters, digits and . _ @ : + -") {
  for (std::string_view good : {"a", "alice@ops", "svc:scheduler", "ci+bot_2.eu-west", "A-Z.0-9"})
    CHECK_MESSAGE(validate_name("principal", good).ok(), good);
  CHECK(validate_name("principal", std::string(128, 'x')).ok());

  struct bad_case {
    std::string name, says;
  };
  const bad_case bad[] = {
      {"", "principal is empty"},
      {std::string(129, 'x'), "is 129 characters long"},
      {"eve\nadmin", "character '\\x0a' at position 4"},
      {"bob smith", "character ' ' at position 4"},
      {"a/b", "character '/' at position 2"},
      {"quote'", "character ''' at position 6"},
      {"back\\slash", "character '\\x5c' at position 5"},
      {"tab\t", "character '\\x09' at position 4"},
      {"caf\xc3\xa9", "character '\\xc3' at position 4"},
      {"esc\x1b[31m", "character '\\x1b' at position 4"},
  };
  for (const auto& b : bad) {
    auto s = validate_name("principal", b.name);
    INFO(loom::auth::printable(b.name));
    REQUIRE_FALSE(s.ok());
    CHECK(s.code() == errc::invalid_argument);
    CHECK_MESSAGE(contains(s.err().message, b.says), s.err().message);
    for (char ch : s.err().message) CHECK((ch >= 0x20 && ch < 0x7f));
  }
  CHECK(contains(validate_name("tenant", "a b").err().message, "tenant 'a b'"));
}

TEST_CASE("issuing refuses a principal, tenant or zone outside the name rules") {
  claims c = sample();
  c.principal = "root\nadmin";
  auto r = issue_token(c, key);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, "principal 'root\\x0aadmin' has character '\\x0a' at position 5"));

  c = sample();
  c.tenant = "acme corp";
  r = issue_token(c, key);
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, "tenant 'acme corp' has character ' ' at position 5"));

  c = sample();
  c.zones = {"eu west"};
  CHECK(issue_token(c, key).code() == errc::invalid_argument);
  c.zones = {"*", "lab"};
  CHECK(issue_token(c, key).ok());
}

TEST_CASE("printable escapes control bytes, non-ASCII and the backslash and keeps the rest") {
  CHECK(printable("plain text: ok") == "plain text: ok");
  CHECK(printable("a\nb") == "a\\x0ab");
  CHECK(printable("\\x41") == "\\x5cx41");
  CHECK(printable(std::string("\0\x7f", 2)) == "\\x00\\x7f");
}
