// `loom down`: stops the deployment in a data dir — its owner's, no token
// needed (lifecycle.hpp require_owner: whoever can read the pid files and
// signal the processes), audited. The watcher holds the data dir lock while it runs: when the lock is
// held by one, `down` stops it (it stops its services), then takes the lock
// and stops anything still running; when the lock is free no watcher runs,
// and `down` stops what a dead one left (processes verified by pid and
// command line, never by name). It says what it stopped, by name and pid, or
// that nothing was running (exit 0 either way).
#include "client/cli.hpp"
#include "client/dir_lock.hpp"
#include "client/lifecycle.hpp"
#include "client/procs.hpp"

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <thread>

namespace loom::cli {
namespace {
using clock = std::chrono::steady_clock;

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// How long `down` waits for a starting `up` to hand the lock to its watcher,
// and for the lock once the watcher was told to stop.
constexpr auto handover_wait = std::chrono::seconds(10);

int print_result(const context& c, const std::vector<deployed_process>& ps, bool supervised, int left) {
  if (c.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& p : ps) arr.push_back({{"name", p.name}, {"pid", p.pid}, {"stopped", p.stopped}});
    std::cout << nlohmann::json{{"data_dir", c.paths.root}, {"stopped", !ps.empty() && left == 0},
                                {"reason", ps.empty() ? "not running" : ""}, {"processes", arr}, {"left", left}}
                     .dump()
              << std::endl;
  } else if (ps.empty()) {
    std::printf("EdgeLoom is not running in %s\n", c.paths.root.c_str());
  } else {
    std::printf("%s in %s: %s\n",
                supervised ? "EdgeLoom stopped" : "EdgeLoom was not supervised (its watcher had died); stopped",
                c.paths.root.c_str(), describe(ps).c_str());
    if (left > 0) {
      std::vector<deployed_process> stuck;
      for (const auto& p : ps)
        if (!p.stopped) stuck.push_back(p);
      std::fprintf(stderr, "error: %d process(es) would not stop: %s\n", left, describe(stuck).c_str());
    }
  }
  return left == 0 ? ok_exit : error_exit;
}

}  // namespace

int cmd_down(context& c) {
  ::umask(077);
  const layout::paths& p = c.paths;
  // Never set up here: nothing runs.
  if (!exists(p.token_key()) && !exists(p.endpoints())) return print_result(c, {}, false, 0);
  // The owner's, not the admin key's: a damaged or missing keys/token.key (or a
  // token that no longer verifies) must not leave the processes running.
  auto admin = require_owner(c, "loom down");
  if (!admin) {
    audit_local(c, {"loom.down", presented_caller(c), audit::decision::deny, admin.err().message, ""});
    return fail(c, admin.err());
  }

  auto lock = dir_lock::take(p, "down");
  // A starting `up` hands the lock to its watcher within moments.
  for (auto until = clock::now() + handover_wait; !lock && lock.code() == errc::conflict && clock::now() < until;) {
    auto h = read_lock_holder(p);
    if (h.what != "up") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    lock = dir_lock::take(p, "down");
  }
  lock_holder watcher;
  if (!lock) {
    if (lock.code() != errc::conflict) return fail(c, lock.err());
    watcher = read_lock_holder(p);
    if (watcher.what != "watch" || !is_process_of(watcher.pid, p.root, "watcher"))
      return fail(c, make_error(errc::conflict, lock.err().message + "; try again when it is done"));
  }
  auto eps = layout::read_endpoints(p.endpoints());
  std::vector<deployed_process> ps;
  if (eps) ps = running_processes(*eps, p.root);
  const bool supervised = std::any_of(ps.begin(), ps.end(), [](const auto& x) { return x.name == "watcher"; });
  if (!lock && !supervised)  // it holds the lock but is not (yet) in endpoints.json
    ps.insert(ps.begin(), deployed_process{"watcher", watcher.pid});
  // Recorded before anything stops, so a running audit service stores it now.
  audit_local(c, {"loom.down", *admin, audit::decision::allow, "",
                  ps.empty() ? std::string("not running") : "stopping " + describe(ps)});
  int left = stop_processes(ps, p.root);
  if (!lock) lock = dir_lock::take(p, "down", handover_wait);
  if (!lock) return fail(c, make_error(errc::internal, "the watcher stopped but " + lock.err().message));
  if (auto now = layout::read_endpoints(p.endpoints())) {
    for (auto& [name, s] : now->services) s.pid = 0;
    now->watcher_pid = 0;
    (void)layout::write_endpoints(p.endpoints(), *now);
  }
  return print_result(c, ps, supervised || !watcher.what.empty(), left);
}

}  // namespace loom::cli
