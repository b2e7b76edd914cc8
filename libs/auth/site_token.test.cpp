#include "libs/auth/site_token.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace loom;
using namespace loom::auth;

TEST_CASE("an enrolment token parses back to its secret and the cloud key it names") {
  const std::string key(32, '\x7f');
  auto text = make_enrol_token(key);
  CHECK(text.starts_with("lse1."));
  CHECK(text.size() == 5 + 32 + 1 + 64);
  auto t = parse_enrol_token(text);
  REQUIRE(t.ok());
  CHECK(t->cloud_key_raw == key);
  CHECK(t->secret_hex.size() == 32);
  CHECK(enrol_token_hash(*t).size() == 64);
  CHECK(enrol_token_hash(*t) != t->secret_hex);
}

TEST_CASE("two enrolment tokens for the same cloud have different secrets") {
  std::set<std::string> secrets;
  for (int i = 0; i < 100; ++i) secrets.insert(parse_enrol_token(make_enrol_token(std::string(32, 'k')))->secret_hex);
  CHECK(secrets.size() == 100);
}

TEST_CASE("a damaged enrolment token is refused without quoting it") {
  const std::string good = make_enrol_token(std::string(32, 'a'));
  const std::string cases[] = {"", "lt1.abc", good.substr(0, good.size() - 1), good + "0",
                               "lse1." + std::string(32, 'g') + good.substr(37), "LSE1" + good.substr(4)};
  for (const auto& c : cases) {
    auto t = parse_enrol_token(c);
    REQUIRE_FALSE(t.ok());
    CHECK(t.code() == errc::invalid_argument);
    if (c.size() > 10) CHECK(t.err().message.find(c) == std::string::npos);
  }
}

TEST_CASE("site names are lower-case letters, digits and inner dashes, at most 63") {
  CHECK(validate_site_name("plant-a").ok());
  CHECK(validate_site_name("s1").ok());
  CHECK(validate_site_name(std::string(63, 'a')).ok());
  CHECK_FALSE(validate_site_name("").ok());
  CHECK_FALSE(validate_site_name(std::string(64, 'a')).ok());
  CHECK_FALSE(validate_site_name("-a").ok());
  CHECK_FALSE(validate_site_name("Plant").ok());
  CHECK_FALSE(validate_site_name("a.b").ok());
  auto e = validate_site_name("plant/a");
  REQUIRE_FALSE(e.ok());
  CHECK(e.err().message.find("at 6") != std::string::npos);
}
