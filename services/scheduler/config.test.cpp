// The scheduler's environment: defaults, good values, and every bad one refused by name.
#include "services/scheduler/config.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace loom;
using namespace loom::scheduler;

namespace {
env_lookup env_of(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* k) -> const char* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("the scheduler's minimum runtime defaults to 60 s and takes whole seconds") {
  CHECK(load_config(env_of({}))->min_runtime == std::chrono::seconds(60));
  CHECK(load_config(env_of({{"LOOM_SCHEDULER_MIN_RUNTIME_S", ""}}))->min_runtime == std::chrono::seconds(60));
  CHECK(load_config(env_of({{"LOOM_SCHEDULER_MIN_RUNTIME_S", "0"}}))->min_runtime == std::chrono::seconds(0));
  CHECK(load_config(env_of({{"LOOM_SCHEDULER_MIN_RUNTIME_S", "5"}}))->min_runtime == std::chrono::seconds(5));
}

TEST_CASE("a minimum runtime that is not whole seconds in range is refused naming the variable") {
  for (const char* bad : {"abc", "-1", "1.5", "5s", "99999999999999999999", "31536001"}) {
    auto c = load_config(env_of({{"LOOM_SCHEDULER_MIN_RUNTIME_S", bad}}));
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::invalid_argument);
    CHECK(c.err().message.find(std::string("LOOM_SCHEDULER_MIN_RUNTIME_S=") + bad) != std::string::npos);
  }
}
