#include "libs/layout/layout.hpp"
#include "libs/layout/network.hpp"

#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <unistd.h>

using namespace loom;
using namespace loom::layout;

TEST_CASE("--listen takes an IPv4 address and names what is wrong with anything else") {
  CHECK(check_listen("127.0.0.1").ok());
  CHECK(check_listen("0.0.0.0").ok());
  CHECK(check_listen("10.20.0.1").ok());
  for (const char* bad : {"", "10.20.0", "300.1.1.1", "host.example", "10.0.0.1:7400", " 10.0.0.1"}) {
    auto st = check_listen(bad);
    CHECK(st.code() == errc::invalid_argument);
    CHECK(st.err().message.find(std::string("--listen ") + bad) != std::string::npos);
  }
  CHECK(check_listen("::1").err().message.find("IPv6") != std::string::npos);
}

TEST_CASE("--advertise takes an address or a host name, never a wildcard") {
  for (const char* good : {"10.20.0.1", "cloud", "cloud.example.com", "site-1.factory"}) CHECK(check_advertise(good).ok());
  for (const char* bad : {"0.0.0.0", "*", "", "-cloud", "cloud-", "a..b", "1.2.3", "c_loud", "tcp://x"}) {
    auto st = check_advertise(bad);
    CHECK_MESSAGE(st.code() == errc::invalid_argument, bad);
  }
  CHECK(check_advertise("0.0.0.0").err().message.find("wildcard") != std::string::npos);
}

TEST_CASE("--ports is FIRST-LAST within 1024..65535") {
  auto r = parse_port_range("7400-7499");
  REQUIRE(r.ok());
  CHECK(r->first == 7400);
  CHECK(r->second == 7499);
  CHECK(parse_port_range("7400-7400").ok());
  for (const char* bad : {"7400", "7499-7400", "80-90", "7400-70000", "a-b", "7400-", "-7400", "7400-7499x"}) {
    auto st = parse_port_range(bad);
    CHECK_MESSAGE(st.code() == errc::invalid_argument, bad);
    CHECK(st.err().message.find(std::string("--ports ") + bad) != std::string::npos);
  }
}

TEST_CASE("a wildcard listener needs an advertised address, and loopback cannot be advertised elsewhere") {
  network n;
  CHECK(check_network(n).ok());
  n.listen = "0.0.0.0";
  CHECK(check_network(n).err().message.find("needs --advertise") != std::string::npos);
  n.advertise = "10.1.0.1";
  CHECK(check_network(n).ok());
  n.listen = "127.0.0.1";
  CHECK(check_network(n).err().message.find("loopback") != std::string::npos);
}

TEST_CASE("bind_of and advertised map between the listen and the advertised address, and nothing else") {
  network def;
  CHECK(bind_of(def, "tcp://127.0.0.1:7400") == "tcp://127.0.0.1:7400");
  CHECK(advertised(def, "tcp://127.0.0.1:41234") == "tcp://127.0.0.1:41234");
  network n;
  n.listen = "0.0.0.0";
  n.advertise = "10.1.0.1";
  CHECK(bind_of(n, "tcp://10.1.0.1:7400") == "tcp://0.0.0.0:7400");
  CHECK(bind_of(n, "10.1.0.1:7401") == "0.0.0.0:7401");
  CHECK(bind_of(n, "tcp://10.9.9.9:7400") == "tcp://10.9.9.9:7400");  // the cloud's endpoint at a site
  CHECK(advertised(n, "tcp://0.0.0.0:7403") == "tcp://10.1.0.1:7403");
  CHECK(advertised(n, "tcp://127.0.0.1:7403") == "tcp://127.0.0.1:7403");
  CHECK(with_host("tcp://a:1", "b") == "tcp://b:1");
  CHECK(with_host("nocolon", "b") == "nocolon");
  CHECK(host_of("tcp://cloud.example:7400") == "cloud.example");
}

TEST_CASE("endpoints.json keeps the network, and a default one leaves no trace") {
  const auto dir = std::filesystem::temp_directory_path() / ("loom-net-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "endpoints.json").string();
  endpoints e;
  e.services["ingest"] = service_endpoint{"tcp://127.0.0.1:1", "127.0.0.1:2", "", 0};
  REQUIRE(write_endpoints(path, e).ok());
  CHECK(files::read_file(path)->find("network") == std::string::npos);
  e.net.listen = "0.0.0.0";
  e.net.advertise = "cloud.example";
  e.net.first_port = 7400;
  e.net.last_port = 7499;
  e.services["ingest"].data = "tcp://cloud.example:7402";
  REQUIRE(write_endpoints(path, e).ok());
  auto back = read_endpoints(path);
  REQUIRE(back.ok());
  CHECK(back->net.listen == "0.0.0.0");
  CHECK(back->net.advertise == "cloud.example");
  CHECK(back->net.ports() == "7400-7499");
  CHECK(back->services["ingest"].data == "tcp://cloud.example:7402");
  // A hand-edited bad network is named, not half-used.
  REQUIRE(files::write_atomic(path, R"({"services": {}, "network": {"listen": "0.0.0.0"}})", 0600).ok());
  auto bad = read_endpoints(path);
  CHECK(bad.code() == errc::corruption);
  CHECK(bad.err().message.find("\"network\"") != std::string::npos);
  std::filesystem::remove_all(dir);
}
