#include "libs/status/status.hpp"

#include <doctest/doctest.h>

TEST_CASE("every errc has a name that maps back to it") {
  for (int i = 0; i <= 13; ++i) {
    auto c = static_cast<loom::errc>(i);
    auto back = loom::errc_from_string(loom::to_string(c));
    REQUIRE(back.has_value());
    CHECK(*back == c);
  }
  CHECK(loom::to_string(static_cast<loom::errc>(99)) == "unknown");
  CHECK_FALSE(loom::errc_from_string("nope").has_value());
}

TEST_CASE("a result holds either a value or an error") {
  loom::result<int> good = 7;
  CHECK(good.ok());
  CHECK(*good == 7);
  loom::result<int> bad = loom::make_error(loom::errc::not_found, "job j-1");
  CHECK_FALSE(bad.ok());
  CHECK(bad.code() == loom::errc::not_found);
  CHECK(bad.err().to_string() == "not_found: job j-1");
  loom::status s;
  CHECK(s.ok());
  loom::status e = loom::make_error(loom::errc::corruption, "x");
  CHECK(e.code() == loom::errc::corruption);
}

TEST_CASE("exit codes follow the CLI contract") {
  CHECK(loom::exit_code(loom::errc::ok) == 0);
  CHECK(loom::exit_code(loom::errc::permission_denied) == 3);
  CHECK(loom::exit_code(loom::errc::unauthenticated) == 3);
  CHECK(loom::exit_code(loom::errc::unavailable) == 4);
  CHECK(loom::exit_code(loom::errc::invalid_argument) == 1);
}
