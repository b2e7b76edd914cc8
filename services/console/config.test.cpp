#include "services/console/config.hpp"

#include <doctest/doctest.h>

using namespace loom::console;

namespace {
const char* no_env(const char*) { return nullptr; }
}  // namespace

TEST_CASE("the console's options are taken out of the command line and the rest goes to the runtime") {
  auto c = load_config({"loom-console", "--data-dir", "/d", "--https", "0.0.0.0:8443", "--templates", "/t"}, no_env,
                       "/repo/build/bin");
  REQUIRE(c);
  CHECK(c->https_host == "0.0.0.0");
  CHECK(c->https_port == 8443);
  CHECK(c->runtime_args == std::vector<std::string>{"loom-console", "--data-dir", "/d"});
  REQUIRE(c->template_dirs.size() == 3);
  CHECK(c->template_dirs[0] == "/t");
  CHECK(c->template_dirs[1] == "/repo/templates");
  auto d = load_config({"loom-console"}, no_env, "");
  REQUIRE(d);
  CHECK(d->https_port == -1);
}

TEST_CASE("bad console options stop it at start, naming the option") {
  CHECK(load_config({"x", "--https"}, no_env, "").err().message.find("--https needs a value") != std::string::npos);
  CHECK(load_config({"x", "--https", "host:99999"}, no_env, "").err().message.find("port") != std::string::npos);
  CHECK(load_config({"x", "--cert", "/c.pem"}, no_env, "").err().message.find("both --cert and --cert-key") !=
        std::string::npos);
  CHECK_FALSE(host_port("nohost"));
  auto hp = host_port("tcp://127.0.0.1:7400");
  REQUIRE(hp);
  CHECK(hp->first == "127.0.0.1");
  CHECK(hp->second == 7400);
  CHECK(host_port("tcp://0.0.0.0:*")->second == 0);
}
