// Audit replicas on PostgreSQL (issue 30): `loom up --audit-replicas 3` runs
// audit, audit-2 and audit-3 over one store; the one holding the lease stores
// the hash chain, the others stand by (fenced: a standby's receiver drops
// what reaches it, its logic redirects). Every service's emitter pushes to
// the replica whose ROUTER answered its last watermark query, so when the
// lead moves the records follow, re-sent from the new leader's watermark.
// kill -9 of the leader 6 times while jobs are submitted (each an audited
// request): another incarnation takes the lease each time (a standby, or the
// killed one restarted by the watcher), every submit that was answered
// has its record in the chain exactly once, and `loom audit verify` checks
// the whole chain and its anchors.
#include "libs/store/testing.hpp"
#include "loom/v1/audit.pb.h"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"
#include "tests/support/replicas.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <set>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// The records the chain holds for job `id`, by action.
std::map<std::string, int> actions_of(wire::client& audit, const std::string& token, const std::string& id) {
  loom::v1::AuditQueryRequest q;
  q.set_job_id(id);
  q.set_limit(1000);
  std::map<std::string, int> out;
  auto rep = wire::call_typed<loom::v1::AuditQueryReply>(audit, q, token);
  if (!rep) return {{"error: " + rep.err().message, 1}};
  for (const auto& e : rep->events()) ++out[e.action()];
  return out;
}

}  // namespace

TEST_CASE("audit replicas: 6 kill -9 of the leader while jobs are submitted, every answered request's record stored once and the chain verifies") {
  temp_dir home("loom-audit-failover");
  up_guard guard{home.path()};
  auto scratch = store::testing::scratch::make(store::backend::postgres, "auditfailover");
  REQUIRE(scratch.ok());
  ::setenv("LOOM_DATABASE_URL", scratch->url().c_str(), 1);
  ::setenv("LOOM_LEASE_TTL_MS", "300", 1);
  auto up = run_loom(home.path(), {"up", "--audit-replicas", "3", "--import-root", "/usr/share/common-licenses"}, 120s);
  ::unsetenv("LOOM_DATABASE_URL");
  ::unsetenv("LOOM_LEASE_TTL_MS");
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);

  zmq::context_t ctx(1);
  scheduler_access sched{layout::paths{home.path()}};
  scheduler_access audit{layout::paths{home.path()}, "audit"};
  REQUIRE(sched.ok);
  REQUIRE(audit.ok);
  REQUIRE(audit.eps().rpc_targets("audit").size() == 3);
  replica_watch watch(ctx, audit);
  {
    auto vs = wait_views(watch, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 60s);
    INFO(describe(vs));
    REQUIRE(sole_leader(vs));
  }
  // `loom status`: three audit replicas, one leading.
  auto st = loom_json(home.path(), {"status"});
  int leaders = 0;
  for (const auto& r : st.value("audit_replicas", json::array())) leaders += r.value("role", "") == "leader";
  CHECK(st.value("audit_replicas", json::array()).size() == 3);
  CHECK(leaders == 1);

  // A steady stream of audited requests: job submits from their own thread
  // (they queue behind the one trainer).
  std::mutex mu;
  std::vector<std::string> answered;  // job ids whose submit was answered
  std::atomic<bool> stop{false};
  std::condition_variable paced;
  std::atomic<int> failed{0};
  std::thread submitter([&] {
    wire::client cli(ctx, sched.eps().rpc_targets("scheduler"), sched.server_key, sched.mine,
                     wire::client_options{2000ms, 2});
    for (int i = 0; !stop && i < 3000; ++i) {
      auto r = submit_job(cli, sched.token, "audited-" + std::to_string(i), {});
      if (!r) {
        ++failed;
        continue;
      }
      std::unique_lock lock(mu);
      answered.push_back(r->job().id());
      paced.wait_for(lock, 50ms, [&] { return stop.load(); });  // about 20 submits a second until stopped
    }
  });
  struct joiner {
    std::atomic<bool>& stop;
    std::thread& t;
    std::condition_variable& paced;
    ~joiner() {
      stop = true;
      paced.notify_all();
      if (t.joinable()) t.join();
    }
  } join_guard{stop, submitter, paced};

  auto count_answered = [&] {
    std::lock_guard lock(mu);
    return answered.size();
  };
  std::vector<double> takeover_ms;
  for (int round = 0; round < 6; ++round) {
    auto vs = wait_views(watch, [](const auto& v) { return all_answer(v) && sole_leader(v); }, 40s);
    REQUIRE_MESSAGE(sole_leader(vs), "round " << round << ": " << describe(vs));
    const auto old = *sole_leader(vs);
    REQUIRE(old.pid > 0);
    const auto before = count_answered();
    CHECK(eventually([&] { return count_answered() >= before + 3; }, 20s, 20ms));  // traffic flows before the kill
    const auto killed = std::chrono::steady_clock::now();
    REQUIRE(::kill(static_cast<pid_t>(old.pid), SIGKILL) == 0);
    // Whoever holds the lease next leads: a standby, or the killed one's
    // restart when the watcher brings it back before the lease runs out.
    vs = wait_views(watch, [&](const auto& v) {
      auto l = sole_leader(v);
      return l && l->epoch > old.epoch;
    });
    if (!sole_leader(vs))
      for (const std::string n : {"audit", "audit-2", "audit-3"}) {
        auto log = files::read_file(layout::paths{home.path()}.log(n));
        const std::string text = log ? *log : log.err().message;
        MESSAGE(n << ".log (tail):\n" << text.substr(text.size() > 3000 ? text.size() - 3000 : 0));
      }
    REQUIRE_MESSAGE(sole_leader(vs), "round " << round << ": no takeover: " << describe(vs));
    takeover_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - killed).count());
    MESSAGE("round " << round << ": " << old.name << " (epoch " << old.epoch << ") killed, " << sole_leader(vs)->name
                     << " leads at epoch " << sole_leader(vs)->epoch << " after " << takeover_ms.back() << " ms");
    // The killed one comes back (the watcher) and stands by.
    vs = wait_views(watch, [&](const auto& v) {
      for (const auto& x : v)
        if (x.name == old.name) return all_answer(v) && x.role == "standby" && x.pid != old.pid;
      return false;
    }, 40s);
    REQUIRE_MESSAGE(all_answer(vs), old.name << " did not come back as a standby: " << describe(vs));
  }
  stop = true;
  paced.notify_all();
  submitter.join();
  MESSAGE("case=audit_replicas takeover_p50_ms=" << percentile(takeover_ms, 50)
                                                 << " takeover_p99_ms=" << percentile(takeover_ms, 99)
                                                 << " submits_answered=" << answered.size() << " submits_failed=" << failed.load());
  CHECK(answered.size() >= 18);  // at least 3 before each of the 6 kills
  CHECK(failed == 0);  // the scheduler never waits on audit: a request is durable in its spool

  // Every answered submit's record reaches the chain, once.
  wire::client audit_cli(ctx, audit.eps().rpc_targets("audit"), audit.server_key, audit.mine,
                         wire::client_options{2000ms, 2});
  std::vector<std::string> missing, twice;
  for (const auto& id : answered) {
    std::map<std::string, int> acts;
    eventually([&] { return (acts = actions_of(audit_cli, audit.token, id)).count("loom.v1.SubmitJobRequest") > 0; }, 30s, 200ms);
    if (!acts.count("loom.v1.SubmitJobRequest")) missing.push_back(id);
    else if (acts["loom.v1.SubmitJobRequest"] != 1) twice.push_back(id);
  }
  CHECK_MESSAGE(missing.empty(), missing.size() << " answered submits have no record, e.g. " << missing.front());
  CHECK_MESSAGE(twice.empty(), twice.size() << " submits have several records, e.g. " << twice.front());

  // The chain and its anchors verify end to end, across every leader's
  // stretch; a clean stop has the last leader anchor the tail.
  auto down = run_loom(home.path(), {"down"}, 120s);
  REQUIRE_MESSAGE(down.code == 0, down.out << down.err);
  auto verify = run_loom(home.path(), {"audit", "verify", "--database", scratch->url(), "--json"}, 120s);
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  auto v = json::parse(verify.out, nullptr, false);
  REQUIRE(!v.is_discarded());
  CHECK(v.value("rows", 0) >= answered.size());
  CHECK(v.value("anchors", 0) >= 1);
  MESSAGE("audit verify: " << v.value("rows", 0) << " rows, " << v.value("anchors", 0) << " anchors");
}
