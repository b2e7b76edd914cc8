// Cross-process, on loopback (issue 26 item 2): a cloud split over two
// "hosts" (two data dirs sharing one set of keys): `loom up --only
// scheduler,audit` on one, `--only aggregator,ingest --peer-endpoints FILE`
// on the other. Bad --only/--peer-endpoints values are refused at `up` (exit
// 2, naming them) with nothing started. A site enrolling with the first host
// is told the second host's aggregator; the second host's services learn the
// site's keys from the scheduler (key_follower) and forget them within a
// second or two of a revocation. The three-host test (tests/multihost/) runs
// a job over a split cloud in network namespaces.
#include "libs/layout/layout.hpp"
#include "tests/support/edge_sites.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// The first host's keys and admin token, as an operator copies them to the second.
void copy_keys(const std::string& from, const std::string& to) {
  fs::create_directories(to);
  fs::permissions(to, fs::perms::owner_all);
  fs::copy(from + "/keys", to + "/keys", fs::copy_options::recursive);
  fs::copy_file(from + "/admin.token", to + "/admin.token");
}

std::vector<std::string> site_files(const std::string& home) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(home + "/keys/sites", ec), end; !ec && it != end; it.increment(ec))
    out.push_back(it->path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("loom up refuses bad --only and --peer-endpoints values naming them, and starts nothing") {
  temp_dir whole("loom-split-whole"), home("loom-split-bad");
  up_guard g1{whole.path()}, g2{home.path()};
  // A whole cloud's endpoints.json, written without starting it.
  layout::endpoints all;
  all.services["scheduler"] = {"tcp://127.0.0.1:7001", "127.0.0.1:7002", "", 0};
  REQUIRE(layout::write_endpoints(whole.path() + "/endpoints.json", all).ok());
  layout::endpoints sched_host;
  sched_host.only = {"scheduler", "audit"};
  sched_host.services["scheduler"] = {"tcp://127.0.0.1:7001", "127.0.0.1:7002", "", 0};
  sched_host.services["audit"] = {"tcp://127.0.0.1:7003", "127.0.0.1:7004", "tcp://127.0.0.1:7005", 0};
  const std::string peer = whole.path() + "/sched-host.json";
  REQUIRE(layout::write_endpoints(peer, sched_host).ok());

  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--only", "scheduler,gpu"}, "\"gpu\" is no service"},
      {{"--only", "ingest,ingest"}, "names ingest twice"},
      {{"--only", "aggregator,ingest"}, "the scheduler runs on another host; name its endpoints with --peer-endpoints"},
      {{"--peer-endpoints", peer}, "goes with --only"},
      {{"--only", "aggregator,ingest", "--peer-endpoints", whole.path() + "/endpoints.json"}, "is a whole cloud's"},
      {{"--only", "aggregator,ingest", "--peer-endpoints", whole.path() + "/none.json"}, "none.json"},
      {{"--only", "scheduler,ingest", "--peer-endpoints", peer}, "both hosts run scheduler"},
      {{"--only", "aggregator", "--site", "north", "--cloud", "tcp://127.0.0.1:7001"}, "--only splits a cloud"},
      // Scheduler replicas on separate hosts (issue 30): one replica per host, never the same one twice.
      {{"--only", "scheduler,audit", "--scheduler-replica", "2"}, "is beyond --scheduler-replicas 1"},
      {{"--only", "audit,ingest", "--scheduler-replicas", "3", "--scheduler-replica", "2", "--peer-endpoints", peer},
       "--scheduler-replica 2 goes with --only naming the scheduler"},
      {{"--only", "scheduler", "--scheduler-replicas", "3", "--scheduler-replica", "1", "--peer-endpoints", peer},
       "both hosts run scheduler (--only scheduler --scheduler-replica 1)"},
      {{"--scheduler-replica", "6"}, "--scheduler-replica"},
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
    CHECK(!fs::exists(home.path() + "/endpoints.json"));
  }
}

TEST_CASE("a cloud split over two hosts: status shows both, a site is told the other host's aggregator, and its keys "
          "follow enrolment and revocation there") {
  temp_dir a("loom-split-a"), b("loom-split-b");
  up_guard ga{a.path()}, gb{b.path()};
  auto up_a = run_loom(a.path(), {"up", "--only", "scheduler,audit"}, 90s);
  REQUIRE_MESSAGE(up_a.code == 0, up_a.out << up_a.err);
  copy_keys(a.path(), b.path());
  auto up_b = run_loom(b.path(), {"up", "--only", "aggregator,ingest", "--peer-endpoints", a.path() + "/endpoints.json"},
                       90s);
  REQUIRE_MESSAGE(up_b.code == 0, up_b.out << up_b.err);
  // The first host learns the second's while it runs.
  auto again = run_loom(a.path(), {"up", "--peer-endpoints", b.path() + "/endpoints.json"}, 60s);
  REQUIRE_MESSAGE(again.code == 0, again.out << again.err);
  CHECK(again.out.find("kept the other hosts' endpoints") != std::string::npos);
  // Changing what a running host runs needs `loom down`.
  auto change = run_loom(a.path(), {"up", "--only", "scheduler,audit,trainer"}, 60s);
  CHECK(change.code == 1);
  CHECK(change.err.find("run `loom down` first to change --only") != std::string::npos);

  const auto eps_a = layout::read_endpoints(a.path() + "/endpoints.json");
  const auto eps_b = layout::read_endpoints(b.path() + "/endpoints.json");
  REQUIRE(eps_a.ok());
  REQUIRE(eps_b.ok());
  CHECK(eps_a->only == std::vector<std::string>{"scheduler", "audit"});
  CHECK(eps_a->find("aggregator")->rpc == eps_b->find("aggregator")->rpc);
  CHECK(eps_a->find("aggregator")->pid == 0);
  CHECK(eps_b->find("scheduler")->rpc == eps_a->find("scheduler")->rpc);
  for (const auto& home : {a.path(), b.path()}) {
    auto st = loom_json(home, {"status"});
    REQUIRE(st.contains("services"));
    std::map<std::string, std::pair<bool, bool>> seen;  // name -> healthy, other host
    for (const auto& s : st["services"]) seen[s.value("name", "")] = {s.value("healthy", false), s.value("other_host", false)};
    CHECK(seen.size() == 4);
    for (const char* n : {"scheduler", "audit", "aggregator", "ingest"}) {
      CAPTURE(home);
      CAPTURE(n);
      CHECK(seen[n].first);
      const bool here = home == a.path() ? (std::string(n) == "scheduler" || std::string(n) == "audit")
                                         : (std::string(n) == "aggregator" || std::string(n) == "ingest");
      CHECK(seen[n].second == !here);
    }
  }

  // A site enrols with the first host and is told where the second host's aggregator is.
  auto tok = loom_json(a.path(), {"site", "token", "--site", "north"});
  REQUIRE(tok.contains("token"));
  edge_site north;
  north.name = "north";
  auto up_n = run_loom(north.home.path(), {"up", "--site", "north", "--cloud", tok.value("cloud", ""), "--enrol-token",
                                           tok.value("token", "")}, 90s);
  REQUIRE_MESSAGE(up_n.code == 0, up_n.out << up_n.err);
  auto eps_n = layout::read_endpoints(north.home.path() + "/endpoints.json");
  REQUIRE(eps_n.ok());
  CHECK(eps_n->find("aggregator")->rpc == eps_b->find("aggregator")->rpc);
  // The second host admits north's keys without reading the first host's disk.
  auto want = site_files(a.path());
  REQUIRE_FALSE(want.empty());
  CHECK(eventually([&] { return site_files(b.path()) == want; }, 10s, 50ms));
  CHECK(loom_json(north.home.path(), {"status"}).value("services", nlohmann::json::array()).size() >= 4);

  // Revoked at the first host: gone from the second within the follower's period.
  auto revoke = run_loom(a.path(), {"site", "revoke", "north", "--reason", "split test"}, 30s);
  REQUIRE_MESSAGE(revoke.code == 0, revoke.err);
  const auto t0 = std::chrono::steady_clock::now();
  CHECK(eventually([&] { return site_files(b.path()).empty(); }, 10s, 20ms));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  MESSAGE("revocation reached the second host's keys/sites in " << secs << " s");
  CHECK(secs < 3.0);  // 0.5 s period; generous for a loaded CI machine
}
