#include "client/args.hpp"

#include <doctest/doctest.h>

TEST_CASE("options may come before or after positional arguments") {
  auto a = loom::cli::parse({"--data-dir", "/d", "ping", "audit", "--json", "--timeout=3"});
  REQUIRE(a.ok());
  CHECK(a->positional == std::vector<std::string>{"ping", "audit"});
  CHECK(a->get_or("data-dir", "") == "/d");
  CHECK(a->get_or("timeout", "") == "3");
  CHECK(a->flag("json"));
  auto b = loom::cli::parse({"ping", "--json", "audit", "--data-dir", "/d"});
  REQUIRE(b.ok());
  CHECK(b->positional == a->positional);
  CHECK(b->get_or("data-dir", "") == "/d");
}

TEST_CASE("an option without its value is a usage error") {
  auto a = loom::cli::parse({"token", "issue", "--role"});
  REQUIRE_FALSE(a.ok());
  CHECK(a.code() == loom::errc::invalid_argument);
  CHECK(a.err().message.find("--role") != std::string::npos);
}

TEST_CASE("a double dash ends the options") {
  auto a = loom::cli::parse({"tokenize", "--", "--weird-file"});
  REQUIRE(a.ok());
  CHECK(a->positional == std::vector<std::string>{"tokenize", "--weird-file"});
}
