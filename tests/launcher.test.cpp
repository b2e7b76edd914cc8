// Cross-process: `loom up` -> 6/6 healthy -> ping each -> kill -9 one service
// -> a new pid answers within 5 s -> `loom down` leaves no process behind.
// `loom up --trainers 3`: three trainer processes, each a node of the roster.
#include "tests/support/harness.hpp"

#include "libs/layout/layout.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <fstream>
#include <set>
#include <thread>

using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
json status_json(const std::string& dir) {
  auto r = run_loom(dir, {"status", "--json"});
  INFO("status stderr: " << r.err);
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

long pid_of(const json& st, const std::string& name) {
  for (auto& s : st.value("services", json::array()))
    if (s.value("name", "") == name && s.value("healthy", false)) return s.value("pid", 0L);
  return 0;
}

int trainer_nodes(const json& st) {
  int n = 0;
  for (auto& node : st.value("nodes", json::array())) n += node.value("service", "") == "trainer";
  return n;
}

std::vector<long> all_pids(const json& st) {
  std::vector<long> out;
  for (auto& s : st.value("services", json::array())) out.push_back(s.value("pid", 0L));
  return out;
}
}  // namespace

TEST_CASE("loom up starts six healthy services that survive kill -9 and loom down stops them all") {
  temp_dir home("loom-up");
  up_guard guard{home.path()};
  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up stdout: " << up.out << "\nup stderr: " << up.err);
  REQUIRE(up.code == 0);
  CHECK(up.out.find("6/6 services healthy") != std::string::npos);
  CHECK(up.out.find("console: https://127.0.0.1:") != std::string::npos);  // where to point a browser

  auto st = status_json(home.path());
  REQUIRE(st.contains("services"));
  REQUIRE(st["services"].size() == 6);
  for (auto& s : st["services"]) {
    INFO(s.dump());
    CHECK(s["healthy"].get<bool>());
    CHECK(s["pid"].get<long>() > 0);
    CHECK(s["metrics"].get<std::string>().rfind("127.0.0.1:", 0) == 0);
  }
  // Every service registered with the scheduler.
  for (int i = 0; i < 50 && st["nodes"].size() < 6; ++i) {
    std::this_thread::sleep_for(100ms);
    st = status_json(home.path());
  }
  CHECK(st["nodes"].size() == 6);

  for (const char* svc : {"ingest", "scheduler", "trainer", "aggregator", "audit", "console"}) {
    auto p = run_loom(home.path(), {"ping", svc});
    INFO(svc << ": " << p.out << p.err);
    CHECK(p.code == 0);
  }

  // kill -9 the trainer: a new process answers within 5 s.
  long old_pid = pid_of(st, "trainer");
  REQUIRE(old_pid > 0);
  auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(::kill(static_cast<pid_t>(old_pid), SIGKILL) == 0);
  long new_pid = 0;
  while (std::chrono::steady_clock::now() - killed_at < 5s) {
    auto p = run_loom(home.path(), {"ping", "trainer", "--timeout", "0.3"});
    if (p.code == 0) {
      new_pid = pid_of(status_json(home.path()), "trainer");
      if (new_pid != 0 && new_pid != old_pid) break;
    }
    std::this_thread::sleep_for(50ms);
  }
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at);
  MESSAGE("trainer answered again after " << took.count() << " ms with pid " << new_pid);
  CHECK(new_pid != 0);
  CHECK(new_pid != old_pid);
  CHECK(took < 5s);

  auto before = all_pids(status_json(home.path()));
  auto down = run_loom(home.path(), {"down"});
  INFO(down.out << down.err);
  CHECK(down.code == 0);
  for (long p : before) CHECK_FALSE(alive(p));
  CHECK_FALSE(alive(old_pid));

  // Each service logged a clean stop, within 2 s of its SIGTERM.
  for (const char* svc : {"ingest", "scheduler", "trainer", "aggregator", "audit"}) {
    std::ifstream log(home.path() + "/logs/" + svc + ".log");
    std::string line, last_stop;
    while (std::getline(log, line))
      if (line.find("stopped in ") != std::string::npos) last_stop = line;
    INFO(svc << ": " << last_stop);
    REQUIRE_FALSE(last_stop.empty());
    long ms = std::stol(last_stop.substr(last_stop.find("stopped in ") + 11));
    CHECK(ms < 2000);
  }
}

TEST_CASE("two loom up on different data dirs run side by side") {
  temp_dir a("loom-a"), b("loom-b");
  up_guard ga{a.path()}, gb{b.path()};
  REQUIRE(run_loom(a.path(), {"up"}, 60s).code == 0);
  REQUIRE(run_loom(b.path(), {"up"}, 60s).code == 0);
  auto sa = status_json(a.path()), sb = status_json(b.path());
  REQUIRE(sa["services"].size() == 6);
  REQUIRE(sb["services"].size() == 6);
  for (std::size_t i = 0; i < 6; ++i) {
    CHECK(sa["services"][i]["healthy"].get<bool>());
    CHECK(sb["services"][i]["healthy"].get<bool>());
    CHECK(sa["services"][i]["endpoint"] != sb["services"][i]["endpoint"]);
  }
  // A's client keys are not B's: A's admin token and keys do not open B's services.
  CHECK(run_loom(a.path(), {"down"}).code == 0);
  CHECK(run_loom(b.path(), {"ping"}).code == 0);
}

TEST_CASE("commands report usage errors and unavailability with their exit codes") {
  temp_dir home("loom-codes");
  CHECK(run_loom(home.path(), {"frobnicate"}).code == 2);
  CHECK(run_loom(home.path(), {"ping", "nosuchservice"}).code == 2);
  CHECK(run_loom(home.path(), {"status"}).code == 4);  // nothing running
  CHECK(run_loom(home.path(), {"token", "issue", "--role"}).code == 2);
  CHECK(run_loom(home.path(), {"token", "issue", "--role", "viewer"}).code == 3);  // no admin key yet
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  // Services down: issuing needs the audit service (so the issue is audited)
  // unless --offline says otherwise.
  CHECK(run_loom(home.path(), {"token", "issue", "--role", "viewer"}).code == 4);
  auto t = run_loom(home.path(),
                    {"token", "issue", "--role", "viewer", "--zones", "local", "--ttl", "60", "--json", "--offline"});
  REQUIRE(t.code == 0);
  CHECK(t.err.find("recorded in the local audit spool") != std::string::npos);
  auto j = json::parse(t.out);
  CHECK(j["role"] == "viewer");
  CHECK(j["token"].get<std::string>().rfind("lt1.", 0) == 0);
}

TEST_CASE("loom up --trainers 3 runs three trainer nodes that the watcher restarts and loom down stops") {
  temp_dir home("loom-trainers");
  up_guard guard{home.path()};
  for (const char* bad : {"0", "65", "two", "3x", ""}) {
    auto r = run_loom(home.path(), {"up", "--trainers", bad});
    INFO("--trainers '" << bad << "': " << r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find("--trainers") != std::string::npos);
  }
  auto up = run_loom(home.path(), {"up", "--trainers", "3"}, 60s);
  INFO("up stdout: " << up.out << "\nup stderr: " << up.err);
  REQUIRE(up.code == 0);
  CHECK(up.out.find("8/8 services healthy") != std::string::npos);

  auto st = status_json(home.path());
  REQUIRE(st["services"].size() == 8);
  std::set<long> trainer_pids;
  std::set<std::string> trainer_endpoints;
  for (const char* t : {"trainer", "trainer-2", "trainer-3"}) {
    long pid = pid_of(st, t);
    INFO(t << " in " << st.dump());
    CHECK(pid > 0);
    trainer_pids.insert(pid);
    for (auto& s : st["services"])
      if (s["name"] == t) {
        CHECK(s["node_id"].get<std::string>().rfind(std::string(t) + "@", 0) == 0);
        trainer_endpoints.insert(s["endpoint"].get<std::string>());
      }
  }
  CHECK(trainer_pids.size() == 3);
  CHECK(trainer_endpoints.size() == 3);
  CHECK(std::ifstream(home.path() + "/logs/trainer-3.log").good());
  // All three registered with the scheduler as trainer nodes.
  for (int i = 0; i < 50 && trainer_nodes(st) < 3; ++i) {
    std::this_thread::sleep_for(100ms);
    st = status_json(home.path());
  }
  INFO("roster: " << st["nodes"].dump());
  CHECK(trainer_nodes(st) == 3);
  CHECK(st["nodes"].size() == 8);

  // A plain `loom up` keeps the count; another count needs `loom down` first.
  auto again = run_loom(home.path(), {"up"}, 60s);
  CHECK(again.out.find("8/8 services healthy") != std::string::npos);
  auto change = run_loom(home.path(), {"up", "--trainers", "2"});
  INFO("change: " << change.err);
  CHECK(change.code == 1);
  CHECK(change.err.find("loom down") != std::string::npos);
  CHECK(run_loom(home.path(), {"ping", "trainer-2"}).code == 0);

  // kill -9 trainer-2: the watcher starts a new one, healthy within 20 s.
  long old_pid = pid_of(st, "trainer-2");
  REQUIRE(old_pid > 0);
  auto killed_at = std::chrono::steady_clock::now();
  REQUIRE(::kill(static_cast<pid_t>(old_pid), SIGKILL) == 0);
  long new_pid = 0;
  while (std::chrono::steady_clock::now() - killed_at < 20s) {
    new_pid = pid_of(status_json(home.path()), "trainer-2");
    if (new_pid != 0 && new_pid != old_pid) break;
    std::this_thread::sleep_for(100ms);
  }
  MESSAGE("trainer-2 healthy again after "
          << std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at).count()
          << " ms with pid " << new_pid);
  CHECK(new_pid != 0);
  CHECK(new_pid != old_pid);
  CHECK_FALSE(alive(old_pid));

  auto eps = loom::layout::read_endpoints(home.path() + "/endpoints.json");
  REQUIRE(eps.ok());
  CHECK(eps->trainers == 3);
  REQUIRE(eps->find("trainer-2"));
  CHECK(eps->find("trainer-2")->pid == new_pid);
  std::vector<long> recorded{eps->watcher_pid};
  for (auto& [name, s] : eps->services) recorded.push_back(s.pid);
  for (long p : all_pids(status_json(home.path()))) recorded.push_back(p);
  auto down = run_loom(home.path(), {"down"});
  INFO(down.out << down.err);
  CHECK(down.code == 0);
  for (long p : recorded) CHECK_FALSE(alive(p));

  // The count outlives `loom down`: a plain `loom up` starts three trainers again.
  auto restart = run_loom(home.path(), {"up"}, 60s);
  INFO("restart: " << restart.out << restart.err);
  CHECK(restart.out.find("8/8 services healthy") != std::string::npos);
  CHECK(run_loom(home.path(), {"down"}).code == 0);
}
