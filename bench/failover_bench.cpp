// failover_bench: client-visible failover of the scheduler's replicas (issue
// 30). `loom up --scheduler-replicas 3` on loopback over a shared store (a
// throwaway durable PostgreSQL cluster, or the embedded SQLite file), a client
// load calling ListJobs through the replica set every 5 ms, then `rounds`
// times: kill -9 of the leader, and the time from the kill to the load's first
// answer after it (the takeover: lease expiry on the store's clock, the
// standby's poll, the fenced takeover, loading the state, the client moving to
// the new leader). A submit is made in the middle of each takeover; at the end
// every job must be listed once (lost / duplicated).
//
//   failover_bench [--rounds N] [--ttl-ms T] [--store postgres|sqlite|both]
//   case=scheduler store=postgres ttl_ms=200 failovers=20 failover_p50_ms=… failover_p99_ms=… lost=0 duplicated=0
#include "libs/store/testing.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/replicas.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::test;

namespace {

std::string arg(int argc, char** argv, const char* name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

// One deployment on `url` ("" = the embedded SQLite file): the case's line, or 1 on failure.
int run_case(const std::string& store, const std::string& url, int rounds, int ttl_ms) {
  temp_dir home("loom-failover-bench");
  up_guard guard{home.path()};
  if (!url.empty()) ::setenv("LOOM_DATABASE_URL", url.c_str(), 1);
  ::setenv("LOOM_LEASE_TTL_MS", std::to_string(ttl_ms).c_str(), 1);
  auto up = run_loom(home.path(), {"up", "--scheduler-replicas", "3", "--import-root", "/usr/share/common-licenses"},
                     std::chrono::seconds(120));
  ::unsetenv("LOOM_DATABASE_URL");
  ::unsetenv("LOOM_LEASE_TTL_MS");
  if (up.code != 0) {
    std::fprintf(stderr, "failover_bench: loom up failed: %s%s\n", up.out.c_str(), up.err.c_str());
    return 1;
  }
  zmq::context_t ctx(1);
  scheduler_access a{layout::paths{home.path()}};
  replica_watch watch(ctx, a);
  wire::client cli(ctx, a.eps().rpc_targets("scheduler"), a.server_key, a.mine,
                   wire::client_options{std::chrono::milliseconds(2000), 2});
  std::vector<double> ms;
  std::map<std::string, std::string> submitted;  // request id -> job id
  int refused = 0;
  {
    replica_load load(ctx, a);
    for (int round = 0; round < rounds; ++round) {
      const std::string rid = "bench-" + std::to_string(round);
      auto r = kill_leader(watch, load, [&] {
        auto s = submit_job(cli, a.token, rid, {});
        if (s) submitted[rid] = s->job().id();
        else ++refused;
      });
      if (!r.ok) {
        std::fprintf(stderr, "failover_bench: round %d: %s\n", round, r.why.c_str());
        return 1;
      }
      ms.push_back(r.client_ms);
      std::fprintf(stderr, "round %d: %s epoch %llu -> %s epoch %llu, %.1f ms\n", round, r.old.name.c_str(),
                   static_cast<unsigned long long>(r.old.epoch), r.now.name.c_str(),
                   static_cast<unsigned long long>(r.now.epoch), r.client_ms);
    }
  }
  // Every submit once: resubmitted under its request id it is the same job; the list has each once.
  int lost = refused, duplicated = 0;
  for (const auto& [rid, id] : submitted) {
    auto again = submit_job(cli, a.token, rid, {});
    if (!again || !again->existed() || again->job().id() != id) ++duplicated;
  }
  auto list = wire::call_typed<loom::v1::ListJobsReply>(cli, loom::v1::ListJobsRequest{}, a.token);
  if (!list) {
    std::fprintf(stderr, "failover_bench: ListJobs: %s\n", list.err().to_string().c_str());
    return 1;
  }
  std::multiset<std::string> listed;
  for (const auto& j : list->jobs()) listed.insert(j.id());
  for (const auto& [rid, id] : submitted) {
    const auto n = listed.count(id);
    if (n == 0) ++lost;
    if (n > 1) duplicated += static_cast<int>(n - 1);
  }
  if (listed.size() != submitted.size()) duplicated += static_cast<int>(listed.size()) - static_cast<int>(submitted.size());
  std::printf("case=scheduler store=%s ttl_ms=%d failovers=%zu failover_p50_ms=%.1f failover_p99_ms=%.1f "
              "failover_max_ms=%.1f lost=%d duplicated=%d\n",
              store.c_str(), ttl_ms, ms.size(), percentile(ms, 50), percentile(ms, 99), percentile(ms, 100), lost,
              duplicated);
  std::fflush(stdout);
  return lost == 0 && duplicated == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = std::max(1, std::atoi(arg(argc, argv, "--rounds", "20").c_str()));
  const int ttl_ms = std::max(50, std::atoi(arg(argc, argv, "--ttl-ms", "200").c_str()));
  const std::string which = arg(argc, argv, "--store", "both");
  int rc = 0;
  if (which == "postgres" || which == "both") {
    const int port = 55471;
    if (auto s = store::testing::start_cluster(port, /*durable=*/true); !s.ok()) {
      std::fprintf(stderr, "failover_bench: start postgres: %s\n", s.err().to_string().c_str());
      return 1;
    }
    rc |= run_case("postgres", store::testing::cluster_url(port), rounds, ttl_ms);
    (void)store::testing::stop_cluster(port);
  }
  if (which == "sqlite" || which == "both") rc |= run_case("sqlite", "", rounds, ttl_ms);
  return rc;
}
