// Cross-process, on loopback (issue 26 item 1): `loom up --listen ADDR
// --advertise HOST --ports FIRST-LAST`. Bad values are refused at `up` naming
// the value (exit 2), before anything starts; a range too small for the
// deployment is named with what it needs (exit 1); a deployment's every
// listener takes its port from the range, `loom status` shows the network,
// and a later `up` keeps it. At an edge site's `up`, a --cloud where nothing
// listens (exit 4) and one that answers with another key than the enrolment
// token names (exit 1) are told apart, and nothing is left running.
#include "libs/layout/layout.hpp"
#include "tests/support/cluster.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;

namespace {
int port_of(const std::string& ep) { return std::atoi(ep.substr(ep.rfind(':') + 1).c_str()); }
}  // namespace

TEST_CASE("loom up refuses bad --listen, --advertise and --ports values naming them, and starts nothing") {
  temp_dir home("loom-net-bad");
  up_guard guard{home.path()};
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--listen", "10.255.255.254"}, "--listen 10.255.255.254 is not an address of this host"},
      {{"--listen", "localhost"}, "--listen localhost is not an IPv4 address"},
      {{"--listen", "::1"}, "IPv6 is not supported yet"},
      {{"--listen", "0.0.0.0"}, "--listen 0.0.0.0 needs --advertise HOST"},
      {{"--advertise", "0.0.0.0"}, "--advertise 0.0.0.0 is a wildcard"},
      {{"--advertise", "bad_name"}, "--advertise bad_name is neither an IPv4 address nor a host name"},
      {{"--listen", "127.0.0.1", "--advertise", "10.1.2.3"}, "nothing on another host can reach a loopback listener"},
      {{"--ports", "80-90"}, "--ports 80-90: the range must lie in 1024-65535"},
      {{"--ports", "7499-7400"}, "--ports 7499-7400"},
      {{"--ports", "7400"}, "--ports 7400 is not FIRST-LAST"},
  };
  for (const auto& [args, says] : cases) {
    std::vector<std::string> argv{"up"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = run_loom(home.path(), argv, 30s);
    INFO(args.front() << " " << args.back() << ": " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("loom up: ") != std::string::npos);
    CHECK(r.err.find(says) != std::string::npos);
    CHECK(processes_of(home.path()).empty());
    CHECK(!std::filesystem::exists(home.path() + "/endpoints.json"));
  }
}

TEST_CASE("loom up takes every port from --ports, shows the network in status, keeps it, and names a range too small") {
  temp_dir home("loom-net-ports");
  up_guard guard{home.path()};
  // A range of 3 ports cannot hold six services (each a ROUTER and a metrics port).
  const int first = free_port();
  REQUIRE(first > 0);
  auto small = run_loom(home.path(), {"up", "--ports", std::to_string(first) + "-" + std::to_string(first + 2)}, 60s);
  INFO(small.err);
  CHECK(small.code == 1);
  CHECK(small.err.find("--ports " + std::to_string(first) + "-" + std::to_string(first + 2) + ": EdgeLoom needs ") !=
        std::string::npos);
  CHECK(processes_of(home.path()).empty());

  // A range of 60 from a free port upwards (the machine's ephemeral ports are above 32768).
  const int lo = 20000 + static_cast<int>(::getpid()) % 20000, hi = lo + 59;
  const std::string range = std::to_string(lo) + "-" + std::to_string(hi);
  auto up = run_loom(home.path(), {"up", "--listen", "127.0.0.1", "--ports", range}, 90s);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  auto eps = layout::read_endpoints(home.path() + "/endpoints.json");
  REQUIRE(eps.ok());
  CHECK(eps->net.ports() == range);
  int listeners = 0;
  for (const auto& [name, s] : eps->services) {
    for (const auto& ep : {s.rpc, s.metrics, s.pull, s.data}) {
      if (ep.empty()) continue;
      ++listeners;
      CHECK_MESSAGE(port_of(ep) >= lo, name << " " << ep);
      CHECK_MESSAGE(port_of(ep) <= hi, name << " " << ep);
    }
  }
  // ROUTER and metrics each, audit's PULL, the second of ingest, aggregator,
  // trainer, scheduler (change events) and console (HTTPS).
  CHECK(listeners == 6 * 2 + 1 + 5);
  auto status = loom_json(home.path(), {"status"});
  CHECK(status["network"].value("ports", "") == range);
  CHECK(status["network"].value("listen", "") == "127.0.0.1");
  for (const auto& s : status["services"]) CHECK(s.value("healthy", false));
  // Running: another range is refused, the same (or none) attaches.
  auto other = run_loom(home.path(), {"up", "--ports", std::to_string(lo) + "-" + std::to_string(hi + 1)}, 30s);
  CHECK(other.code == 1);
  CHECK(other.err.find("run `loom down` first to change --listen, --advertise or --ports") != std::string::npos);
  CHECK(run_loom(home.path(), {"up"}, 30s).code == 0);
  REQUIRE(run_loom(home.path(), {"down"}, 60s).code == 0);
  // A later `up` without the options keeps them.
  REQUIRE(run_loom(home.path(), {"up"}, 90s).code == 0);
  eps = layout::read_endpoints(home.path() + "/endpoints.json");
  REQUIRE(eps.ok());
  CHECK(eps->net.ports() == range);
  CHECK(port_of(eps->find("scheduler")->rpc) >= lo);
  CHECK(port_of(eps->find("scheduler")->rpc) <= hi);
}

TEST_CASE("an edge site's up tells a cloud that cannot be reached from one that answers with another key, and leaves nothing running") {
  cluster a;
  REQUIRE(a.up);
  auto tok = loom_json(a.home.path(), {"site", "token", "--site", "plant"});
  REQUIRE(tok.contains("token"));
  const std::string token = tok.value("token", "");
  // Nothing listens there.
  temp_dir s1("loom-site-unreach");
  up_guard g1{s1.path()};
  const std::string nowhere = "tcp://127.0.0.1:" + std::to_string(free_port());
  auto r1 = run_loom(s1.path(), {"up", "--site", "plant", "--cloud", nowhere, "--enrol-token", token}, 60s);
  INFO("unreachable: " << r1.err);
  CHECK(r1.code == 4);
  CHECK(r1.err.find("--cloud " + nowhere + " cannot be reached") != std::string::npos);
  CHECK(processes_of(s1.path()).empty());
  // Something listens there, with another CURVE key: the cloud's ingest, not its scheduler.
  temp_dir s2("loom-site-wrongkey");
  up_guard g2{s2.path()};
  const std::string ingest = a.ep("ingest").rpc;
  auto r2 = run_loom(s2.path(), {"up", "--site", "plant", "--cloud", ingest, "--enrol-token", token}, 60s);
  INFO("wrong key: " << r2.err);
  CHECK(r2.code == 1);
  CHECK(r2.err.find("--cloud " + ingest + " answers, but not as the cloud scheduler the enrolment token names") !=
        std::string::npos);
  CHECK(processes_of(s2.path()).empty());
}
