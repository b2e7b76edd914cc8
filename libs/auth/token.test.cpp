#include "libs/auth/token.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

using namespace loom::auth;
using loom::errc;

namespace {
const std::string key = "k-0123456789abcdef0123456789abcd";  // fixed: tests are deterministic
constexpr std::int64_t t0 = 1'700'000'000;

claims sample(role r = role::operator_) {
  return claims{"alice@ops", r, {"eu-west", "lab"}, t0 + 3600, 7, t0};
}

std::string issue(const claims& c, std::string_view k = key) {
  auto t = issue_token(c, k);
  REQUIRE(t.ok());
  return *t;
}

std::string temp_dir() {
  char tmpl[] = "/tmp/loom-auth-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }
}  // namespace

TEST_CASE("role names round-trip and unknown names are rejected") {
  for (role r : {role::viewer, role::operator_, role::admin}) CHECK(role_from_string(to_string(r)) == r);
  CHECK(to_string(role::operator_) == "operator");
  CHECK_FALSE(role_from_string("root").has_value());
  CHECK_FALSE(role_from_string("operator_").has_value());
}

TEST_CASE("a token issued for any role and several zones verifies to the same claims") {
  for (role r : {role::viewer, role::operator_, role::admin}) {
    claims c = sample(r);
    c.zones = {"a", "b", "c"};
    auto tok = issue(c);
    CHECK(tok.starts_with("lt1."));
    auto got = verify_token(tok, key, {t0 + 10, 7});
    REQUIRE(got.ok());
    CHECK(got->principal == c.principal);
    CHECK(got->r == r);
    CHECK(got->zones == c.zones);
    CHECK(got->expires_unix_s == c.expires_unix_s);
    CHECK(got->epoch == 7);
    CHECK(got->issued_unix_s == t0);
  }
}

TEST_CASE("the payload encoding keeps field boundaries apart") {
  claims a = sample(), b = sample();
  a.zones = {"ab", "c"};
  b.zones = {"a", "bc"};
  auto ta = issue(a), tb = issue(b);
  CHECK(ta != tb);
  CHECK(verify_token(ta, key, {t0})->zones == a.zones);
  CHECK(verify_token(tb, key, {t0})->zones == b.zones);
}

TEST_CASE("flipping any single byte of a token makes it fail verification") {
  auto tok = issue(sample());
  int verified = 0, tried = 0;
  for (std::size_t i = 0; i < tok.size(); ++i) {
    for (unsigned char mask : {0x01, 0x02, 0x20, 0x80}) {
      std::string bad = tok;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      auto r = verify_token(bad, key, {t0});
      ++tried;
      if (r.ok()) {
        ++verified;
        MESSAGE("flip at " << i << " mask " << int(mask) << " still verified");
      } else {
        CHECK(r.code() == errc::unauthenticated);
      }
    }
  }
  CHECK(tried == static_cast<int>(tok.size()) * 4);
  CHECK(verified == 0);
  CHECK(verify_token(tok, key, {t0}).ok());  // the unflipped token is fine
}

TEST_CASE("a token signed with another key is a signature mismatch") {
  auto tok = issue(sample(), "another key entirely, same size!");
  auto r = verify_token(tok, key, {t0});
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::unauthenticated);
  CHECK(r.err().message == "forged or corrupted token: signature mismatch");
  CHECK_FALSE(contains(r.err().message, tok));
  CHECK_FALSE(contains(r.err().message, key));
}

TEST_CASE("a token is refused from its expiry second on") {
  auto tok = issue(sample());
  CHECK(verify_token(tok, key, {t0 + 3599}).ok());
  auto r = verify_token(tok, key, {t0 + 3600});
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::unauthenticated);
  CHECK(contains(r.err().message, "token expired at 2023-11-14T23:13:20Z"));
}

TEST_CASE("a token from a revoked epoch is refused and names both epochs") {
  auto tok = issue(sample());  // epoch 7
  CHECK(verify_token(tok, key, {t0, 7}).ok());
  auto r = verify_token(tok, key, {t0, 8});
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::unauthenticated);
  CHECK(r.err().message == "token epoch 7 revoked (current epoch 8)");
}

TEST_CASE("malformed tokens are unauthenticated with a reason") {
  auto tok = issue(sample());
  auto dot = tok.rfind('.');
  struct { std::string token, reason; } cases[] = {
      {"", "missing lt1. prefix"},
      {"lt2." + tok.substr(4), "missing lt1. prefix"},
      {tok.substr(0, dot), "expected lt1.<payload>.<signature>"},
      {tok + ".x", "expected lt1.<payload>.<signature>"},
      {tok.substr(0, dot) + ".!!!!", "signature is not base64url"},
      {tok.substr(0, tok.size() - 3), "signature has the wrong length"},
      {std::string(20000, 'a'), "longer than any token"},
  };
  for (const auto& c : cases) {
    auto r = verify_token(c.token, key, {t0});
    REQUIRE_FALSE(r.ok());
    CHECK(r.code() == errc::unauthenticated);
    CHECK_MESSAGE(contains(r.err().message, c.reason), r.err().message);
  }
}

TEST_CASE("issuing refuses claims that could never be used safely") {
  auto bad = [](claims c, std::string_view k = key) { return issue_token(c, k).code(); };
  claims c = sample();
  CHECK(bad(c, "") == errc::invalid_argument);
  c.principal.clear();
  CHECK(bad(c) == errc::invalid_argument);
  c = sample();
  c.zones.clear();
  CHECK(bad(c) == errc::invalid_argument);
  c.zones = {"eu", ""};
  CHECK(bad(c) == errc::invalid_argument);
  c = sample();
  c.expires_unix_s = c.issued_unix_s;
  CHECK(bad(c) == errc::invalid_argument);
  CHECK(bad(sample()) == errc::ok);
}

TEST_CASE("zone scope allows listed zones and the wildcard only") {
  claims c = sample();
  CHECK(zone_allowed(c, "eu-west"));
  CHECK(zone_allowed(c, "lab"));
  CHECK_FALSE(zone_allowed(c, "eu"));
  CHECK_FALSE(zone_allowed(c, ""));
  c.zones = {"*"};
  CHECK(zone_allowed(c, "anywhere"));
}

TEST_CASE("a created key file is private, loads as 32 bytes and is never overwritten") {
  auto dir = temp_dir();
  auto path = dir + "/keys/token.key";
  REQUIRE(create_token_key(path).ok());
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto k1 = load_token_key(path);
  REQUIRE(k1.ok());
  CHECK(k1->size() == 32);
  auto again = create_token_key(path);
  CHECK(again.code() == errc::already_exists);
  CHECK(*load_token_key(path) == *k1);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a key file readable by others, or with bad content, is refused naming the path") {
  auto dir = temp_dir();
  auto path = dir + "/token.key";
  std::ofstream(path) << std::string(64, 'a') << "\n";
  REQUIRE(::chmod(path.c_str(), 0644) == 0);
  auto r = load_token_key(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == errc::permission_denied);
  CHECK(contains(r.err().message, path));
  CHECK(contains(r.err().message, "0644"));
  REQUIRE(::chmod(path.c_str(), 0600) == 0);
  REQUIRE(load_token_key(path).ok());
  CHECK(*load_token_key(path) == std::string(32, '\xaa'));

  std::ofstream(path) << std::string(62, 'a') << "\n";
  r = load_token_key(path);
  CHECK(r.code() == errc::invalid_argument);
  CHECK(contains(r.err().message, path));
  std::ofstream(path) << std::string(63, 'a') << "g";
  CHECK(load_token_key(path).code() == errc::invalid_argument);
  CHECK(load_token_key(dir + "/missing.key").code() == errc::not_found);
  std::filesystem::remove_all(dir);
}

TEST_CASE("the epoch file is 0 when missing and round-trips a written value") {
  auto dir = temp_dir();
  auto path = dir + "/epoch";
  CHECK(*read_epoch(path) == 0);
  REQUIRE(write_epoch(path, 42).ok());
  CHECK(*read_epoch(path) == 42);
  std::ofstream(path) << "4x2\n";
  CHECK(read_epoch(path).code() == errc::corruption);
  std::filesystem::remove_all(dir);
}
