// The audit service's options and environment: defaults, good values, and
// every bad one refused naming the option or variable.
#include "services/audit/config.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace loom;
using namespace loom::audit_service;

namespace {
env_lookup env_of(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* k) -> const char* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("the audit service's defaults are 30 days of rotation, 180 of retention and the endpoints file's pull") {
  auto c = load_config({"loom-audit", "--data-dir", "/d"}, env_of({}));
  REQUIRE(c.ok());
  CHECK(c->kek_rotation == std::chrono::days(30));
  CHECK(c->retention == std::chrono::days(180));
  CHECK(c->pull_bind.empty());
  CHECK(c->runtime_args == std::vector<std::string>{"loom-audit", "--data-dir", "/d"});
  auto empty = load_config({"loom-audit"}, env_of({{"LOOM_AUDIT_KEK_ROTATION_DAYS", ""}, {"LOOM_AUDIT_RETENTION_DAYS", ""}}));
  REQUIRE(empty.ok());
  CHECK(empty->kek_rotation == std::chrono::days(30));
  CHECK(empty->retention == std::chrono::days(180));
}

TEST_CASE("--pull-bind is taken out of the runtime's arguments and the day counts are read") {
  auto c = load_config({"loom-audit", "--bind", "tcp://0.0.0.0:7000", "--pull-bind", "tcp://0.0.0.0:7001", "--zone", "z"},
                       env_of({{"LOOM_AUDIT_KEK_ROTATION_DAYS", "7"}, {"LOOM_AUDIT_RETENTION_DAYS", "365"}}));
  REQUIRE(c.ok());
  CHECK(c->pull_bind == "tcp://0.0.0.0:7001");
  CHECK(c->runtime_args == std::vector<std::string>{"loom-audit", "--bind", "tcp://0.0.0.0:7000", "--zone", "z"});
  CHECK(c->kek_rotation == std::chrono::days(7));
  CHECK(c->retention == std::chrono::days(365));
}

TEST_CASE("a bad --pull-bind is refused naming the option") {
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"loom-audit", "--pull-bind"}, {"loom-audit", "--pull-bind", ""}, {"loom-audit", "--pull-bind", "7001"},
           {"loom-audit", "--pull-bind", "tcp://0.0.0.0:70000"}, {"loom-audit", "--pull-bind", "--zone"}}) {
    auto c = load_config(argv, env_of({}));
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::invalid_argument);
    CHECK(c.err().message.starts_with("--pull-bind"));
  }
}

TEST_CASE("day counts that are not whole days in range are refused naming the variable, never clamped") {
  for (const char* bad : {"abc", "-1", "0", "1.5", "30d", " 30", "3651", "99999999999999999999"}) {
    auto c = load_config({"loom-audit"}, env_of({{"LOOM_AUDIT_KEK_ROTATION_DAYS", bad}}));
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::invalid_argument);
    CHECK(c.err().message.find(std::string("LOOM_AUDIT_KEK_ROTATION_DAYS=") + bad + " is not a number of days (1..3650)") !=
          std::string::npos);
  }
  // Below the minimum retention was raised to 180 in silence before; now it is said.
  for (const char* bad : {"30", "179", "36501", "x"}) {
    auto c = load_config({"loom-audit"}, env_of({{"LOOM_AUDIT_RETENTION_DAYS", bad}}));
    REQUIRE_FALSE(c.ok());
    CHECK(c.err().message.find(std::string("LOOM_AUDIT_RETENTION_DAYS=") + bad + " is not a number of days (180..36500)") !=
          std::string::npos);
  }
}
