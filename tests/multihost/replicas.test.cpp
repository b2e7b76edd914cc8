// Scheduler replicas in three zones (issue 30 item 1): hosts zone-a, zone-b
// and zone-c (network and mount namespaces of their own, lan.hpp) each run
// one scheduler replica (`loom up --only ... --scheduler-replicas 3
// --scheduler-replica K`) over one PostgreSQL on a fourth host, `store`.
// zone-a also runs audit, ingest, the aggregator and two trainers; zone-b and
// zone-c hold a copy of zone-a's keys and every host copies of the others'
// endpoints.json (merged by process name into peers.json). The test's own
// client sits in the store's network namespace and reaches each replica at
// its LAN address:
//   - kill -9 of the leader, 20 times, with 100 jobs queued and two running:
//     a replica in another zone takes over, the client's calls fail over by
//     themselves, no job is lost or duplicated, the running stages go on
//     without being placed again; client-visible failover p50/p99 printed;
//   - split brain: the leader's host is cut off (its link down): a replica
//     in another zone takes over, the cut-off one commits nothing (a submit
//     made on its host fails and leaves no job), and after healing there is
//     one leader, the old one a standby at the new epoch, and one job table.
// Root, iproute2 and util-linux only: otherwise skipped (LOOM_TEST_SKIPPED).
#include "libs/layout/layout.hpp"
#include "tests/multihost/lan.hpp"
#include "tests/multihost/lan_checks.hpp"
#include "tests/support/replicas.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <set>

using namespace loom;
using namespace loom::test;

namespace {

// The calling thread in `h`'s network namespace until destroyed (threads it
// starts meanwhile, ZeroMQ's I/O threads among them, stay there).
class in_netns {
 public:
  explicit in_netns(const lan_host& h) {
    back_ = ::open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    const int fd = ::open(("/proc/" + std::to_string(h.holder) + "/ns/net").c_str(), O_RDONLY | O_CLOEXEC);
    entered_ = back_ >= 0 && fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) ::close(fd);
  }
  ~in_netns() {
    if (entered_) (void)::setns(back_, CLONE_NEWNET);
    if (back_ >= 0) ::close(back_);
  }
  bool entered() const { return entered_; }

 private:
  int back_ = -1;
  bool entered_ = false;
};

struct zone {
  lan_host* host;
  int replica;
};

int count_kind(const json& events, const std::string& kind) {
  int n = 0;
  for (const auto& e : events) n += e.value("kind", "") == kind;
  return n;
}

}  // namespace

TEST_CASE("scheduler replicas in three zones: 20 kill -9 of the leader and a leader cut off, none lost, duplicated or restarted") {
  remove_lan_leftovers();
  lan net({"zone-a", "zone-b", "zone-c", "store"});
  if (auto why = net.make(); !why.empty()) {
    MESSAGE("LOOM_TEST_SKIPPED: cannot make four hosts (network and mount namespaces on a bridge): " << why);
    return;
  }
  auto& a = net.host("zone-a");
  auto& b = net.host("zone-b");
  auto& c = net.host("zone-c");
  auto& store = net.host("store");
  const std::vector<zone> zones{{&a, 1}, {&b, 2}, {&c, 3}};
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };

  lan_postgres pg(net, store, 17000 + static_cast<int>(::getpid() + 1500) % 2000);
  const std::string pg_err = pg.start();
  REQUIRE_MESSAGE(pg_err.empty(), pg_err);
  // A 300 ms lease; the watcher passes it on to the scheduler and its restarts.
  const std::map<std::string, std::string> env{{"LOOM_DATABASE_URL", pg.url()}, {"LOOM_LEASE_TTL_MS", "300"}};

  auto up = net.loom(a, {"up", "--only", "audit,scheduler,ingest,trainer,aggregator", "--trainers", "2",
                         "--scheduler-replicas", "3", "--scheduler-replica", "1", "--zone", "zone-a", "--import-root",
                         licences, "--listen", a.ip, "--ports", "7400-7499"},
                     120s, env);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  // zone-b and zone-c: a copy of zone-a's keys, its data dir's path, the peers known so far.
  std::vector<std::string> peers_of_c;
  for (auto* z : {&b, &c}) {
    z->data = a.data;
    net.copy_keys(a, *z);
    std::vector<std::string> args{"up", "--only", "scheduler", "--scheduler-replicas", "3", "--scheduler-replica",
                                  z == &b ? "2" : "3", "--zone", z->name, "--import-root", licences, "--listen", z->ip,
                                  "--ports", "7400-7499", "--peer-endpoints", net.copy_endpoints(a, *z)};
    if (z == &c) args.insert(args.end(), {"--peer-endpoints", net.copy_endpoints(b, c)});
    auto r = net.loom(*z, args, 120s, env);
    REQUIRE_MESSAGE(r.code == 0, z->name << ": " << r.out << r.err);
  }
  // The hosts started earlier learn the later ones while they run.
  auto learn = net.loom(a, {"up", "--peer-endpoints", net.copy_endpoints(b, a), "--peer-endpoints",
                            net.copy_endpoints(c, a)},
                        60s, env);
  REQUIRE_MESSAGE(learn.code == 0, learn.out << learn.err);
  learn = net.loom(b, {"up", "--peer-endpoints", net.copy_endpoints(c, b)}, 60s, env);
  REQUIRE_MESSAGE(learn.code == 0, learn.out << learn.err);
  // A host names one replica only; a peer running the same one is refused.
  auto twice = net.loom(c, {"up", "--peer-endpoints", net.copy_endpoints(c, c)}, 30s, env);
  CHECK(twice.code != 0);
  CHECK(twice.err.find("both hosts run scheduler-3") != std::string::npos);

  // `loom status` on zone-a: three replicas, one per zone, one leading.
  auto status = as_json(net.loom(a, {"status", "--json"}, 30s));
  std::set<std::string> replica_zones;
  int leaders = 0;
  for (const auto& r : status.value("scheduler_replicas", json::array())) {
    replica_zones.insert(r.value("zone", ""));
    leaders += r.value("role", "") == "leader";
  }
  CHECK_MESSAGE((replica_zones == std::set<std::string>{"zone-a", "zone-b", "zone-c"}), status.dump());
  CHECK(leaders == 1);
  MESSAGE("three zones up: " << elapsed() << " s");

  // The test's client, in the store's namespace: zone-a's endpoints with its
  // peers merged, each replica's pid from its own host's endpoints.json.
  in_netns client_ns(store);
  REQUIRE(client_ns.entered());
  scheduler_access access{layout::paths{net.seen_from_outside(a, a.data)}};
  REQUIRE(access.ok);
  access.source = [&] {
    auto e = layout::read_endpoints(net.seen_from_outside(a, a.data + "/endpoints.json"));
    layout::endpoints out = e ? *e : layout::endpoints{};
    for (const auto& z : zones) {
      auto own = layout::read_endpoints(net.seen_from_outside(*z.host, z.host->data + "/endpoints.json"), false);
      const auto name = layout::instance_name("scheduler", z.replica);
      if (own && own->find(name) && out.find(name)) out.services[name].pid = own->find(name)->pid;
    }
    return out;
  };
  auto host_of = [&](const std::string& replica) -> lan_host& {
    for (const auto& z : zones)
      if (layout::instance_name("scheduler", z.replica) == replica) return *z.host;
    return a;
  };
  zmq::context_t ctx(1);
  replica_watch watch(ctx, access);
  {
    auto vs = wait_views(watch, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 60s);
    INFO(describe(vs));
    REQUIRE(sole_leader(vs));
  }
  wire::client cli(ctx, access.eps().rpc_targets("scheduler"), access.server_key, access.mine,
                   wire::client_options{2000ms, 2});
  REQUIRE(cli.endpoints().size() == 3);

  // Two long jobs on zone-a's trainers that run through every failover, then 100 that wait.
  auto job_show = [&](const std::string& id) { return as_json(net.loom(a, {"job", "show", id, "--json"}, 30s)); };
  auto step_of = [&](const std::string& id) {
    auto j = job_show(id);
    return j.contains("stages") && !j["stages"].empty() ? j["stages"][0].value("step", -1) : -1;
  };
  std::vector<std::string> running;
  for (int i = 0; i < 2; ++i) {
    auto r = submit_job(cli, access.token, "running-" + std::to_string(i),
                        {"pretrain.train.steps=100000", "pretrain.train.threads=1"});
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.err().to_string()));
    running.push_back(r->job().id());
  }
  for (const auto& id : running) CHECK(eventually([&] { return step_of(id) >= 1; }, 180s, 500ms));
  std::set<std::string> ids(running.begin(), running.end());
  std::map<std::string, std::string> by_request;
  for (int i = 0; i < 100; ++i) {
    auto r = submit_job(cli, access.token, "queued-" + std::to_string(i), {});
    REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : r.err().to_string()));
    ids.insert(r->job().id());
    by_request["queued-" + std::to_string(i)] = r->job().id();
  }
  std::map<std::string, int> steps_before;
  for (const auto& id : running) steps_before[id] = step_of(id);
  MESSAGE("2 running, 100 queued: " << elapsed() << " s");

  auto submit_answered = [&](const std::string& rid) { return submit_job_answered(cli, access.token, rid); };
  std::vector<double> failover_ms;
  std::set<std::string> leading_zones;
  {
    replica_load load(ctx, access);
    for (int round = 0; round < 20; ++round) {
      auto r = kill_leader(watch, load, [&] {
        auto fo = submit_answered("failover-" + std::to_string(round));
        CHECK_MESSAGE(fo.ok(), (fo.ok() ? "" : fo.err().to_string()));
        if (fo.ok()) {
          ids.insert(fo->job().id());
          by_request["failover-" + std::to_string(round)] = fo->job().id();
        }
      });
      REQUIRE_MESSAGE(r.ok, "round " << round << ": " << r.why);
      failover_ms.push_back(r.client_ms);
      leading_zones.insert(host_of(r.now.name).name);
      MESSAGE("round " << round << ": " << r.old.name << " in " << host_of(r.old.name).name << " killed, " << r.now.name
                       << " in " << host_of(r.now.name).name << std::string(r.own_restart ? " (its restart)" : "") << " leads at epoch " << r.now.epoch << ", the client saw "
                       << r.client_ms << " ms");
    }
    CHECK(load.successes() > 100);
    MESSAGE("client load: " << load.successes() << " calls answered, " << load.failures() << " gave up");
  }
  const double p50 = percentile(failover_ms, 50), p99 = percentile(failover_ms, 99);
  MESSAGE("case=scheduler_three_zones failover_p50_ms=" << p50 << " failover_p99_ms=" << p99
                                                       << " failovers=" << failover_ms.size());
  // The typical failover is what the product promises; one slow round on a
  // loaded CI box is not (four namespaces, three replicas, two trainers and
  // PostgreSQL on 2 cores): a clean-clone CI saw a round of 12.0 s (p50 0.71 s)
  // where the lease moved three times in the next round. The worst round is
  // bounded by kill_leader's own wait for an answer after the takeover.
  CHECK(p50 < 2000);
  CHECK(p99 < 20000);
  CHECK(leading_zones.size() >= 2);  // the lead moved between zones

  // Split brain: the leader's host loses its only link. The leader must not be
  // zone-a's (its trainers would go with it): kill it until another leads.
  auto vs = wait_views(watch, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 40s);
  REQUIRE(sole_leader(vs));
  for (int tries = 0; tries < 3 && &host_of(sole_leader(vs)->name) == &a; ++tries) {
    replica_load load(ctx, access);
    auto r = kill_leader(watch, load, [] {});
    REQUIRE_MESSAGE(r.ok, r.why);
    vs = wait_views(watch, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 40s);
    REQUIRE(sole_leader(vs));
  }
  const auto old = *sole_leader(vs);
  lan_host& cut = host_of(old.name);
  REQUIRE(&cut != &a);
  std::string zombie_id;
  {
    replica_load load(ctx, access);
    eventually([&] { return load.successes() >= 3; }, 10s, 5ms);
    const auto cut_at = std::chrono::steady_clock::now();
    REQUIRE(net.set_link(cut, false));
    struct heal {
      lan& n;
      lan_host& h;
      ~heal() { n.set_link(h, true); }
    } heal_guard{net, cut};
    vs = wait_views(watch, [&](const auto& v) {
      auto l = sole_leader(v);
      return l && l->name != old.name && l->epoch > old.epoch;
    });
    INFO("after the cut: " << describe(vs));
    REQUIRE(sole_leader(vs));
    double client_ms = -1;
    eventually([&] { return (client_ms = load.failover_after(cut_at)) >= 0; }, 15s, 5ms);
    MESSAGE(old.name << " in " << cut.name << " cut off; " << sole_leader(vs)->name << " leads at epoch "
                     << sole_leader(vs)->epoch << "; the client saw " << client_ms << " ms");
    CHECK(client_ms >= 0);
    auto during = submit_answered("during-split");
    REQUIRE_MESSAGE(during.ok(), (during.ok() ? "" : during.err().to_string()));
    ids.insert(during->job().id());
    by_request["during-split"] = during->job().id();
    // On the cut-off host, only the old leader is in reach: nothing commits.
    auto zombie = net.loom(cut, {"job", "submit", "--template", "pipeline-test", "--set", "text=" + std::string(licences) +
                                 "/GPL-3", "--json"},
                           60s);
    MESSAGE("a submit on the cut-off host: exit " << zombie.code << ": " << zombie.out << zombie.err);
    CHECK(zombie.code != 0);
    zombie_id = as_json(zombie).value("id", "");
  }
  // Healed: one leader, the old one a standby at the new epoch.
  vs = wait_views(watch, [&](const auto& v) {
    auto l = sole_leader(v);
    if (!l || !all_answer(v)) return false;
    for (const auto& r : v)
      if (r.name == old.name) return r.role == "standby" && r.epoch == l->epoch;
    return false;
  }, 40s);
  INFO("after healing: " << describe(vs));
  REQUIRE(sole_leader(vs));
  auto log = files::read_file(net.seen_from_outside(cut, cut.data + "/logs/" + old.name + ".log"));
  REQUIRE(log.ok());
  CHECK(log->find("steps down") != std::string::npos);
  MESSAGE("split healed: " << elapsed() << " s");

  // One job table: every job once, none from the cut-off host, a request id is one job.
  auto list = as_json(net.loom(b, {"job", "list", "--json"}, 30s));
  std::set<std::string> listed;
  for (const auto& j : list.value("jobs", json::array())) listed.insert(j.value("id", ""));
  CHECK(list.value("jobs", json::array()).size() == ids.size());
  CHECK(listed == ids);
  CHECK(ids.size() == 2 + 100 + 20 + 1);
  if (!zombie_id.empty()) CHECK(!listed.count(zombie_id));
  std::map<std::string, int> requests_of;
  for (const auto& [rid, id] : by_request) ++requests_of[id];
  for (const auto& [id, n] : requests_of) CHECK_MESSAGE(n == 1, id << " was answered to " << n << " requests");
  // The running stages were re-attached by each new leader, never placed again.
  for (const auto& id : running) {
    auto events = as_json(net.loom(a, {"job", "logs", id, "--json"}, 30s)).value("events", json::array());
    // On failure, the job's events say which takeover found its trainer silent and when.
    CHECK_MESSAGE(count_kind(events, "placed") == 1, id << ": " << events.dump());
    CHECK_MESSAGE(count_kind(events, "requeued") == 0, id << ": " << events.dump());
    CHECK(count_kind(events, "reattached") >= 1);
    CHECK(step_of(id) > steps_before[id]);
    net.loom(a, {"job", "cancel", id}, 30s);
  }
  MESSAGE("total " << elapsed() << " s");
  net.stop_deployments();
}
