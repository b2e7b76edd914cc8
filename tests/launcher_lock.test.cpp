// Cross-process: one supervisor per data dir. Two `loom up` at once leave one
// watcher and one set of services; a second `loom watch` is refused; the
// watcher's restarts show in `loom status`; after kill -9 of the watcher,
// `loom up` stops what it left before starting afresh, and `loom down` names
// what it stopped — or says nothing was running.
#include "tests/support/harness.hpp"

#include "libs/layout/layout.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <signal.h>

#include <algorithm>
#include <future>
#include <set>
#include <thread>

using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {
json status_json(const std::string& dir) {
  auto r = run_loom(dir, {"status", "--json"});
  auto j = json::parse(r.out, nullptr, false);
  return j.is_discarded() ? json::object() : j;
}

json service(const json& st, const std::string& name) {
  for (auto& s : st.value("services", json::array()))
    if (s.value("name", "") == name) return s;
  return json::object();
}

// The watcher and service pids endpoints.json records.
std::vector<long> recorded_pids(const std::string& dir) {
  auto eps = loom::layout::read_endpoints(dir + "/endpoints.json");
  std::vector<long> out;
  if (!eps) return out;
  out.push_back(eps->watcher_pid);
  for (auto& [name, s] : eps->services) out.push_back(s.pid);
  return out;
}

bool wait_dead(long pid, std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (alive(pid) && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  return !alive(pid);
}
}  // namespace

TEST_CASE("two loom up at once on one data dir leave one watcher, and loom down stops all of it") {
  temp_dir home("loom-twice");
  up_guard guard{home.path()};
  auto first = std::async(std::launch::async, [&] { return run_loom(home.path(), {"up"}, 90s); });
  auto second = std::async(std::launch::async, [&] { return run_loom(home.path(), {"up"}, 90s); });
  auto a = first.get(), b = second.get();
  INFO("first: " << a.out << a.err << "\nsecond: " << b.out << b.err);
  CHECK(a.code == 0);
  CHECK(b.code == 0);
  // One started it, the other attached to it.
  const int attached = (a.out.find("EdgeLoom is already") != std::string::npos) +
                       (b.out.find("EdgeLoom is already") != std::string::npos);
  CHECK(attached == 1);
  CHECK(a.out.find("6/6 services healthy") != std::string::npos);
  CHECK(b.out.find("6/6 services healthy") != std::string::npos);

  // Exactly the recorded watcher and six services run for this data dir, and they stay.
  std::this_thread::sleep_for(1500ms);
  auto pids = recorded_pids(home.path());
  REQUIRE(pids.size() == 7);
  auto running = processes_of(home.path());
  std::sort(running.begin(), running.end());
  std::sort(pids.begin(), pids.end());
  CHECK(running == pids);
  auto st = status_json(home.path());
  for (const char* s : {"audit", "scheduler", "ingest", "trainer", "aggregator"}) {
    INFO(s << ": " << service(st, s).dump());
    CHECK(service(st, s).value("restarts", 99) == 0);
  }

  // A second watcher is refused, naming the one that holds the data dir.
  const long watcher = loom::layout::read_endpoints(home.path() + "/endpoints.json")->watcher_pid;
  auto w = run_loom(home.path(), {"watch"}, 10s);
  CHECK(w.code == 1);
  CHECK(w.err.find("loom watch (pid " + std::to_string(watcher) + ")") != std::string::npos);

  // kill -9 the trainer: `loom status` counts the watcher's restart. Waited
  // for as a condition (the new trainer answers), with a deadline, not a
  // number of polls; whenever status shows the new pid it must show the
  // restart too (it reads the watcher's record after asking the processes).
  const long trainer = service(st, "trainer").value("pid", 0L);
  REQUIRE(trainer > 0);
  REQUIRE(::kill(static_cast<pid_t>(trainer), SIGKILL) == 0);
  json again;
  bool restarted = false;
  for (auto until = std::chrono::steady_clock::now() + 60s; !restarted && std::chrono::steady_clock::now() < until;) {
    again = status_json(home.path());
    auto t = service(again, "trainer");
    restarted = t.value("healthy", false) && t.value("pid", 0L) != trainer;
    if (!restarted) std::this_thread::sleep_for(100ms);
  }
  INFO("status: " << again.dump());
  REQUIRE(restarted);
  CHECK(service(again, "trainer").value("restarts", 0) == 1);
  CHECK(service(again, "trainer").value("last_exit", "") == "killed by signal 9");
  CHECK(service(again, "scheduler").value("restarts", 99) == 0);
  auto text = run_loom(home.path(), {"status"});
  bool row = false;
  for (std::size_t at = 0; (at = text.out.find("\ntrainer ", at)) != std::string::npos; ++at) {
    auto line = text.out.substr(at + 1, text.out.find('\n', at + 1) - at - 1);
    std::vector<std::string> cols;
    for (std::size_t i = 0, j; i < line.size(); i = j) {
      while (i < line.size() && line[i] == ' ') ++i;
      j = std::min(line.find(' ', i), line.size());
      if (j > i) cols.push_back(line.substr(i, j - i));
    }
    INFO("row: " << line);
    // The services table's row (SERVICE HEALTH PID UPTIME_S RESTARTS); the
    // trainers' table below it has a "trainer" row of its own.
    row = row || (cols.size() >= 5 && cols[4] == "1");
  }
  CHECK(row);

  auto all = recorded_pids(home.path());
  auto down = run_loom(home.path(), {"down"}, 60s);
  INFO("down: " << down.out << down.err);
  CHECK(down.code == 0);
  CHECK(down.out.find("EdgeLoom stopped") != std::string::npos);
  CHECK(down.out.find("watcher (pid " + std::to_string(watcher) + ")") != std::string::npos);
  for (long p : all) CHECK_FALSE(alive(p));
  CHECK(processes_of(home.path()).empty());
}

TEST_CASE("after kill -9 of the watcher loom up replaces what it left and loom down names what it stopped") {
  temp_dir home("loom-orphans");
  up_guard guard{home.path()};
  auto up = run_loom(home.path(), {"up"}, 60s);
  REQUIRE(up.code == 0);
  auto eps = *loom::layout::read_endpoints(home.path() + "/endpoints.json");
  std::vector<long> old_services;
  for (auto& [name, s] : eps.services) old_services.push_back(s.pid);
  REQUIRE(::kill(static_cast<pid_t>(eps.watcher_pid), SIGKILL) == 0);
  REQUIRE(wait_dead(eps.watcher_pid, 10s));
  for (long p : old_services) CHECK(alive(p));  // orphans, still serving

  // `loom up` stops the orphans (naming them) and starts a fresh deployment.
  auto again = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << again.out << again.err);
  REQUIRE(again.code == 0);
  CHECK(again.err.find("dead watcher") != std::string::npos);
  CHECK(again.err.find("scheduler (pid " + std::to_string(eps.find("scheduler")->pid) + ")") != std::string::npos);
  for (long p : old_services) CHECK_FALSE(alive(p));
  auto now = *loom::layout::read_endpoints(home.path() + "/endpoints.json");
  std::set<long> fresh;
  for (auto& [name, s] : now.services) fresh.insert(s.pid);
  for (long p : old_services) CHECK(fresh.count(p) == 0);
  CHECK(processes_of(home.path()).size() == 7);

  // Watcher killed again: `loom down` stops the six services it left and names them.
  REQUIRE(::kill(static_cast<pid_t>(now.watcher_pid), SIGKILL) == 0);
  REQUIRE(wait_dead(now.watcher_pid, 10s));
  auto down = run_loom(home.path(), {"down", "--json"}, 60s);
  INFO("down: " << down.out << down.err);
  CHECK(down.code == 0);
  auto j = json::parse(down.out, nullptr, false);
  REQUIRE(j.is_object());
  CHECK(j["stopped"] == true);
  std::set<std::string> names;
  for (auto& p : j["processes"]) {
    names.insert(p["name"].get<std::string>());
    CHECK(p["pid"] == now.find(p["name"].get<std::string>())->pid);
    CHECK(p["stopped"] == true);
  }
  CHECK(names == std::set<std::string>{"audit", "scheduler", "ingest", "trainer", "aggregator", "console"});
  CHECK(processes_of(home.path()).empty());

  // Nothing runs now: `loom down` says so, in text and JSON, with exit 0.
  auto idle = run_loom(home.path(), {"down"});
  CHECK(idle.code == 0);
  CHECK(idle.out.find("EdgeLoom is not running in") != std::string::npos);
  CHECK(idle.out.find("stopped") == std::string::npos);
  auto idle_json = json::parse(run_loom(home.path(), {"down", "--json"}).out, nullptr, false);
  REQUIRE(idle_json.is_object());
  CHECK(idle_json["stopped"] == false);
  CHECK(idle_json["reason"] == "not running");
}
