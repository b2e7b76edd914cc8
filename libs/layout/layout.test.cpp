#include "libs/layout/layout.hpp"

#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

TEST_CASE("the endpoints file round-trips every field") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  loom::layout::endpoints e;
  e.zone = "edge-a";
  e.watcher_pid = 42;
  e.services["audit"] = {"tcp://127.0.0.1:5000", "127.0.0.1:5001", "tcp://127.0.0.1:5002", 77};
  e.services["scheduler"] = {"tcp://127.0.0.1:5003", "127.0.0.1:5004", "", 78};
  REQUIRE(loom::layout::write_endpoints(path, e).ok());
  auto back = loom::layout::read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->zone == "edge-a");
  CHECK(back->watcher_pid == 42);
  REQUIRE(back->find("audit"));
  CHECK(back->find("audit")->pull == "tcp://127.0.0.1:5002");
  CHECK(back->find("scheduler")->pid == 78);
  CHECK(back->find("trainer") == nullptr);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("a damaged endpoints file is corruption, a missing one not_found") {
  char tmpl[] = "/tmp/loom-layout-XXXXXX";
  REQUIRE(::mkdtemp(tmpl));
  std::string path = std::string(tmpl) + "/endpoints.json";
  CHECK(loom::layout::read_endpoints(path).code() == loom::errc::not_found);
  REQUIRE(loom::files::write_atomic(path, "{\"services\": [1,", 0644).ok());
  auto r = loom::layout::read_endpoints(path);
  CHECK(r.code() == loom::errc::corruption);
  CHECK(r.err().message.find(path) != std::string::npos);
  std::filesystem::remove_all(tmpl);
}

TEST_CASE("the five services start audit first and map to their binaries") {
  CHECK(loom::layout::service_names.front() == "audit");
  CHECK(loom::layout::is_service("trainer"));
  CHECK_FALSE(loom::layout::is_service("loom"));
  CHECK(loom::layout::binary_of("trainer") == "loom-trainer");
}
