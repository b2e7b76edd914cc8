// `loom up` and `loom down`: the local launcher. `up` creates keys on first
// run, picks free loopback ports, writes endpoints.json, starts the detached
// watcher (which starts and restarts the services: one process each, and
// `--trainers N` trainer processes) and returns once every process answers
// Health. `down` stops the watcher, which stops the services.
//
// The trainer count is kept in endpoints.json: a later `loom up` keeps it.
// Changing it needs a stopped deployment (`loom down` first): a running one
// refuses, rather than leave the watcher and the file disagreeing. The same
// holds for the import roots (`--import-root DIR`, repeatable: the
// directories ingest may import from besides <data>/imports).
#include "client/cli.hpp"
#include "client/procs.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <optional>
#include <thread>

namespace loom::cli {
namespace {
using clock = std::chrono::steady_clock;

void print_services(const context& c, const std::vector<health_info>& hs) {
  if (c.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (auto& h : hs)
      arr.push_back({{"name", h.name}, {"healthy", h.healthy}, {"pid", h.pid}, {"endpoint", h.endpoint},
                     {"metrics", h.metrics}, {"error", h.error}});
    print_json({{"data_dir", c.paths.root}, {"services", arr}});
    return;
  }
  std::printf("%-11s %-8s %-7s %-26s %s\n", "SERVICE", "HEALTH", "PID", "ENDPOINT", "METRICS");
  for (auto& h : hs)
    std::printf("%-11s %-8s %-7lld %-26s %s\n", printable(h.name).c_str(), h.healthy ? "healthy" : "DOWN",
                static_cast<long long>(h.pid), printable(h.endpoint).c_str(),
                h.metrics.empty() ? "-" : printable("http://" + h.metrics + "/metrics").c_str());
}

// --trainers N: nullopt when absent (the table checked 1..max_trainers).
std::optional<int> trainers_option(const context& c) {
  auto n = c.a.number("trainers");
  if (!n) return std::nullopt;
  return static_cast<int>(*n);
}

}  // namespace

int cmd_up(context& c) {
  auto want_trainers = trainers_option(c);
  std::vector<std::string> roots;  // --import-root, absolute (ingest checks them again at start)
  for (const auto& r : c.a.all("import-root")) {
    std::error_code ec;
    roots.push_back(std::filesystem::absolute(r, ec).lexically_normal().string());
    while (roots.back().size() > 1 && roots.back().ends_with('/')) roots.back().pop_back();
    if (auto st = layout::check_import_root(c.paths, roots.back()); !st) return usage("loom up: " + st.err().message);
  }
  if (auto st = ensure_keys(c.paths); !st) return fail(c, st.err());
  if (auto st = files::make_dirs(c.paths.root + "/logs", 0755); !st) return fail(c, st.err());
  const auto wait = c.a.duration("wait").value_or(std::chrono::seconds(30));  // (0, 3600] s: the table's range

  auto eps = layout::read_endpoints(c.paths.endpoints());
  bool running = eps && is_loom_process(static_cast<pid_t>(eps->watcher_pid));
  if (running && want_trainers && *want_trainers != eps->trainers)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root + " with " +
                                                  std::to_string(eps->trainers) + " trainer(s); run `loom down` "
                                                  "first to change it to --trainers " +
                                                  std::to_string(*want_trainers)));
  if (running && !roots.empty() && roots != eps->import_roots)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root +
                                                  " with other import roots; run `loom down` first to change them"));
  layout::endpoints e;
  if (eps) e = *eps;
  if (!running) {
    // Ports: one ROUTER and one metrics port per process, plus audit's PULL.
    // Kept across restarts so a restarted service is found where it was.
    if (auto z = c.a.get("zone")) e.zone = *z;
    if (want_trainers) e.trainers = *want_trainers;
    if (!roots.empty()) e.import_roots = roots;
    auto names = layout::process_names(e);
    // Forget trainer-K entries beyond the new count (a smaller --trainers than last time).
    std::erase_if(e.services,
                  [&](const auto& kv) { return std::find(names.begin(), names.end(), kv.first) == names.end(); });
    auto ports = free_ports(static_cast<int>(names.size()) * 2 + 1);
    if (ports.size() < names.size() * 2 + 1)
      return fail(c, make_error(errc::unavailable, "could not find free loopback ports"));
    std::size_t k = 0;
    for (const auto& name : names) {
      auto& s = e.services[name];
      s.rpc = "tcp://127.0.0.1:" + std::to_string(ports[k++]);
      s.metrics = "127.0.0.1:" + std::to_string(ports[k++]);
      s.pull = name == "audit" ? "tcp://127.0.0.1:" + std::to_string(ports[k++]) : "";
      s.pid = 0;
    }
    e.watcher_pid = 0;
    if (auto st = layout::write_endpoints(c.paths.endpoints(), e); !st) return fail(c, st.err());
    pid_t w = spawn({bin_dir() + "/loom", "watch", "--data-dir", c.paths.root}, c.paths.watcher_log(), true);
    if (w < 0) return fail(c, make_error(errc::internal, "could not start the watcher"));
    if (!c.json)
      std::printf("starting EdgeLoom in %s (watcher pid %d)\n", printable(c.paths.root).c_str(), static_cast<int>(w));
  }

  // Wait until every process answers Health.
  const auto names = layout::process_names(e);
  auto deadline = clock::now() + wait;
  std::vector<health_info> hs;
  c.timeout = std::chrono::milliseconds(500);
  for (;;) {
    hs.clear();
    bool all = true;
    for (const auto& name : names) {
      hs.push_back(probe(c, name));
      all = all && hs.back().healthy;
    }
    if (all) break;
    if (clock::now() >= deadline) {
      print_services(c, hs);
      std::fprintf(stderr, "error: not all services became healthy within %g s; logs in %s/logs\n",
                   std::chrono::duration<double>(wait).count(), printable(c.paths.root).c_str());
      return unavailable_exit;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  print_services(c, hs);
  if (!c.json) std::printf("%zu/%zu services healthy\n", hs.size(), hs.size());
  return ok_exit;
}

int cmd_down(context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  if (!eps) {
    if (c.json) print_json({{"stopped", false}, {"reason", "not running"}});
    else std::printf("EdgeLoom is not running in %s\n", printable(c.paths.root).c_str());
    return ok_exit;
  }
  // The watcher stops the services it started; then make sure none is left
  // (e.g. when the watcher itself was killed).
  bool watcher_gone = stop_process(static_cast<pid_t>(eps->watcher_pid), SIGTERM, 10000);
  if (!watcher_gone) stop_process(static_cast<pid_t>(eps->watcher_pid), SIGKILL, 2000);
  auto now = layout::read_endpoints(c.paths.endpoints());
  if (now) eps = now;
  int left = 0;
  for (auto& [name, s] : eps->services) {
    if (!stop_process(static_cast<pid_t>(s.pid), SIGTERM, 3000) &&
        !stop_process(static_cast<pid_t>(s.pid), SIGKILL, 2000))
      ++left;
    s.pid = 0;
  }
  eps->watcher_pid = 0;
  (void)layout::write_endpoints(c.paths.endpoints(), *eps);
  if (c.json) print_json({{"stopped", left == 0}, {"left", left}});
  else std::printf(left == 0 ? "EdgeLoom stopped\n" : "EdgeLoom stopped, %d process(es) would not die\n", left);
  return left == 0 ? ok_exit : error_exit;
}

}  // namespace loom::cli
