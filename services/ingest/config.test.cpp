// The ingest service's environment: the default sync endpoint, a wider one,
// and every bad one refused naming the variable.
#include "services/ingest/config.hpp"

#include <doctest/doctest.h>

#include <map>
#include <string>

using namespace loom;
using namespace loom::ingest;

namespace {
env_lookup env_of(std::map<std::string, std::string> m) {
  return [m = std::move(m)](const char* k) -> const char* {
    auto it = m.find(k);
    return it == m.end() ? nullptr : it->second.c_str();
  };
}
}  // namespace

TEST_CASE("the sync server listens where the deployment says by default and where LOOM_INGEST_SYNC_BIND says") {
  CHECK(load_config(env_of({}))->sync_bind.empty());
  CHECK(load_config(env_of({{"LOOM_INGEST_SYNC_BIND", ""}}))->sync_bind.empty());
  CHECK(load_config(env_of({{"LOOM_INGEST_SYNC_BIND", "tcp://0.0.0.0:7450"}}))->sync_bind == "tcp://0.0.0.0:7450");
  CHECK(load_config(env_of({{"LOOM_INGEST_SYNC_BIND", "tcp://*:*"}}))->sync_bind == "tcp://*:*");
}

TEST_CASE("a sync endpoint that cannot be listened on is refused naming the variable") {
  for (const char* bad : {"7450", "0.0.0.0:7450", "tcp://0.0.0.0", "tcp://0.0.0.0:0", "tcp://0.0.0.0:65536",
                          "tcp://:7450", "udp://0.0.0.0:7450", "tcp://0.0.0.0:74x"}) {
    auto c = load_config(env_of({{"LOOM_INGEST_SYNC_BIND", bad}}));
    REQUIRE_FALSE(c.ok());
    CHECK(c.code() == errc::invalid_argument);
    CHECK(c.err().message.starts_with(std::string("LOOM_INGEST_SYNC_BIND=") + bad + " is not an endpoint"));
  }
}
