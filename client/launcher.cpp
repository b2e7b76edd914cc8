// `loom up`: the local launcher. It takes the data dir lock (dir_lock.hpp),
// stops what a dead watcher left running, creates keys on first run and
// checks them (key_setup.hpp), picks ports (up_network.hpp: loopback and any
// free port unless --listen/--advertise/--ports say otherwise), writes
// endpoints.json, starts the detached watcher (which starts and restarts the
// services: one process each, and `--trainers N` trainer processes) handing
// it the lock, and returns once every process answers Health. A service that
// exits twice while `up` waits is reported with its last output lines and
// everything is stopped again. A second `up` while the lock is held attaches:
// it waits for the running deployment and prints its status.
//
// The trainer count is kept in endpoints.json: a later `loom up` keeps it.
// Changing it needs a stopped deployment (`loom down` first): a running one
// refuses, rather than leave the watcher and the file disagreeing. The same
// holds for the import roots (`--import-root DIR`, repeatable: the
// directories ingest may import from besides <data>/imports).
// `--site NAME --cloud EP [--enrol-token T]` makes it an edge site of a cloud
// (up_site.cpp): audit, ingest and the trainers (zone NAME) run here and
// register with the cloud's scheduler; no scheduler or aggregator runs here.
// `--only S1,S2 --peer-endpoints FILE` splits a cloud over hosts (up_split.hpp).
// Everything runs under umask 077: the data dir is the owner's alone.
#include "client/cli.hpp"
#include "client/dir_lock.hpp"
#include "client/lifecycle.hpp"
#include "client/procs.hpp"
#include "client/site_enrol.hpp"
#include "client/up_network.hpp"
#include "client/up_split.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>
#include <optional>
#include <thread>

namespace loom::cli {
namespace {
using clock = std::chrono::steady_clock;

// A process that exits this often while `up` waits is not starting: report it
// and stop, rather than wait out --wait while it crash-loops.
constexpr std::uint64_t failed_starts = 2;

// The console's address (https://HOST:PORT) when it runs in this deployment; "" otherwise.
std::string console_url(const context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  const auto* s = eps && eps->runs_here("console") ? eps->find("console") : nullptr;
  if (!s || s->data.rfind("tcp://", 0) != 0) return "";
  return "https://" + s->data.substr(6);
}

void print_services(const context& c, const std::vector<health_info>& hs) {
  if (c.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (auto& h : hs)
      arr.push_back({{"name", h.name}, {"healthy", h.healthy}, {"pid", h.pid}, {"endpoint", h.endpoint},
                     {"metrics", h.metrics}, {"error", h.error}});
    print_json({{"data_dir", c.paths.root}, {"services", arr}, {"console", console_url(c)}});
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

// Why `up` gives up: printed like fail() does, with its own exit code. The
// message spans lines (what failed, the service's last output lines, what
// was stopped): each is escaped on its own and printed as a line.
int report(const context& c, const std::string& code, const std::string& message, int rc) {
  if (c.json) {
    print_json({{"error", {{"code", code}, {"message", message}}}});
    return rc;
  }
  const std::string lines = indented_lines(message, "");
  std::fprintf(stderr, "error: %s", lines.empty() ? "\n" : lines.c_str());
  return rc;
}

// A failed start's exit code: 4 when the service said it could not reach
// something (its errc, as service_main prints it), else 1 (config or data).
int exit_for(const std::string& last_error) {
  return last_error.find("unavailable:") != std::string::npos ||
                 last_error.find("deadline_exceeded:") != std::string::npos
             ? unavailable_exit
             : error_exit;
}

std::string indent(const std::string& lines) {
  std::string out = "  ";
  for (char ch : lines) out += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
  return out;
}

// The watcher, stopped with everything it started (and zeroed pids in endpoints.json).
void stop_all(const context& c) {
  auto eps = layout::read_endpoints(c.paths.endpoints());
  if (!eps) return;
  auto ps = running_processes(*eps, c.paths.root);
  stop_processes(ps, c.paths.root);
  if (auto now = layout::read_endpoints(c.paths.endpoints())) {
    for (auto& [name, s] : now->services) s.pid = 0;
    now->watcher_pid = 0;
    (void)layout::write_endpoints(c.paths.endpoints(), *now);
  }
}

// Waits until every process answers Health. `owner`: this `up` started the
// watcher `watcher`, and stops everything when a process cannot start.
int wait_healthy(context& c, bool owner, pid_t watcher, std::chrono::milliseconds wait, const caller& who) {
  auto first = layout::read_endpoints(c.paths.endpoints());
  if (!first) return fail(c, first.err());
  std::map<std::string, std::uint64_t> baseline;  // restarts before this `up` began to wait
  for (const auto& [name, s] : first->services) baseline[name] = owner ? 0 : s.restarts;
  const auto names = layout::process_names(*first);
  auto deadline = clock::now() + wait;
  std::vector<health_info> hs;
  c.timeout = std::chrono::milliseconds(500);
  auto give_up = [&](const std::string& code, const std::string& why, int rc) {
    std::string msg = why;
    if (owner) {
      stop_all(c);
      msg += "\nstopped EdgeLoom in " + c.paths.root + " again (watcher and services)";
    }
    audit_local(c, {"loom.up", who, audit::decision::error, why, ""});
    return report(c, code, msg, rc);
  };
  for (;;) {
    hs.clear();
    bool all = true;
    for (const auto& name : names) {
      hs.push_back(probe(c, name));
      all = all && hs.back().healthy;
    }
    if (all) break;
    auto eps = layout::read_endpoints(c.paths.endpoints());
    for (const auto& name : names) {
      const auto* s = eps ? eps->find(name) : nullptr;
      if (!s || s->restarts < baseline[name] + failed_starts) continue;
      return give_up("service_failed",
                     name + " cannot start: it " + s->last_exit + " (" +
                         std::to_string(s->restarts - baseline[name]) + " times since `loom up` began; log " +
                         c.paths.log(name) + "). Its last output:\n" +
                         indent(s->last_error.empty() ? "(nothing)" : s->last_error),
                     exit_for(s->last_error));
    }
    if (owner && ::waitpid(watcher, nullptr, WNOHANG) == watcher) {  // our child: reaped here
      return give_up("watcher_failed", "the watcher (pid " + std::to_string(watcher) + ") exited; see " +
                                           c.paths.watcher_log(),
                     error_exit);
    }
    if (clock::now() >= deadline) {
      print_services(c, hs);
      const double secs = std::chrono::duration<double>(wait).count();
      std::fprintf(stderr, "error: not all services became healthy within %g s; logs in %s/logs\n", secs,
                   printable(c.paths.root).c_str());
      audit_local(c, {"loom.up", who, audit::decision::error, "not healthy within " + std::to_string(secs) + " s", ""});
      return unavailable_exit;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  print_services(c, hs);
  if (!c.json) std::printf("%zu/%zu services healthy\n", hs.size(), hs.size());
  if (const auto url = console_url(c); !url.empty() && !c.json)
    std::printf("console: %s (log in with a token: %s holds the admin's)\n", printable(url).c_str(),
                printable(c.paths.admin_token()).c_str());
  // Delivered now that audit runs, with whatever waited in the CLI's spool.
  audit_local(c, {"loom.up", who, audit::decision::allow, "",
                  std::to_string(hs.size()) + " processes healthy" + (owner ? "" : " (already running)")},
              std::chrono::seconds(5));
  return ok_exit;
}

// Another process holds the data dir: a starting or running deployment is
// waited for; anything else (`loom down` at work) is an error naming it.
int attach(context& c, std::optional<int> want_trainers, const std::vector<std::string>& roots,
           const layout::network& net, const split_plan& split, std::chrono::milliseconds wait, const caller& who) {
  lock_holder holder;
  result<layout::endpoints> eps = make_error(errc::not_found, "");
  bool watched = false, starting = false;
  // The holder writes its name just after it took the lock: give it a moment.
  for (auto until = clock::now() + std::chrono::seconds(2);;) {
    holder = read_lock_holder(c.paths);
    eps = layout::read_endpoints(c.paths.endpoints());
    watched = eps && is_process_of(static_cast<pid_t>(eps->watcher_pid), c.paths.root, "watcher");
    starting = (holder.what == "up" || holder.what == "watch") && holder.pid > 0 && ::kill(holder.pid, 0) == 0;
    if (watched || starting || (holder.pid > 0 && !holder.what.empty()) || clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (!watched && !starting)
    return fail(c, make_error(errc::conflict, c.paths.root + " is in use by " + holder.describe() +
                                                  "; try again when it is done"));
  if (!c.json)
    std::printf("EdgeLoom is already %s in %s (%s)\n", watched ? "running" : "starting",
                printable(c.paths.root).c_str(), printable(holder.describe()).c_str());
  // A starting `up` writes endpoints.json, then hands the lock to its watcher:
  // wait for that, so the file read below is the one the watcher runs.
  for (auto until = clock::now() + wait; !watched && clock::now() < until;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    holder = read_lock_holder(c.paths);
    if (holder.pid <= 0) continue;  // not written yet
    const bool holder_alive = ::kill(holder.pid, 0) == 0;
    if (holder.what == "up" && holder_alive) continue;
    eps = layout::read_endpoints(c.paths.endpoints());
    watched = eps && is_process_of(static_cast<pid_t>(eps->watcher_pid), c.paths.root, "watcher");
    if (!watched && (holder.what != "watch" || !holder_alive)) break;  // the `up` gave up
  }
  if (!watched)
    return fail(c, make_error(errc::unavailable, "EdgeLoom did not start in " + c.paths.root + ": the `loom up` "
                                                     "starting it gave up or its watcher has not started"));
  if (eps && want_trainers && *want_trainers != eps->trainers)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root + " with " +
                                                  std::to_string(eps->trainers) + " trainer(s); run `loom down` "
                                                  "first to change it to --trainers " +
                                                  std::to_string(*want_trainers)));
  if (eps && network_options_given(c) &&
      (net.listen != eps->net.listen || net.advertise != eps->net.advertise || net.ports() != eps->net.ports()))
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root + " listening on " +
                                                  eps->net.listen + " as " + eps->net.advertise +
                                                  (eps->net.has_range() ? " (ports " + eps->net.ports() + ")" : "") +
                                                  "; run `loom down` first to change --listen, --advertise or --ports"));
  if (eps && !roots.empty() && roots != eps->import_roots)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root +
                                                  " with other import roots; run `loom down` first to change them"));
  if (eps && only_given(c) && split.only != eps->only)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root + " with " +
                                                  (eps->only.empty() ? "every service" : "other --only services") +
                                                  "; run `loom down` first to change --only"));
  if (eps && c.a.number("scheduler-replica") && split.replica != eps->scheduler_replica)
    return fail(c, make_error(errc::conflict, "EdgeLoom is running in " + c.paths.root + " as scheduler replica " +
                                                  std::to_string(eps->scheduler_replica) +
                                                  "; run `loom down` first to change --scheduler-replica"));
  // The other hosts' endpoints may come (or change) while this one runs: the
  // scheduler reads them at each enrolment and checkpoint check, the
  // scheduler's clients when the file changes (scheduler_targets.hpp).
  if (split.peers) {
    if (auto st = keep_peers(c.paths, split); !st) return fail(c, st.err());
    if (!c.json) std::printf("kept the other hosts' endpoints in %s\n", printable(c.paths.peers()).c_str());
  }
  return wait_healthy(c, false, 0, wait, who);
}

}  // namespace

result<std::vector<std::string>> import_roots_option(const context& c) {
  std::vector<std::string> roots;
  for (const auto& r : c.a.all("import-root")) {
    std::error_code ec;
    roots.push_back(std::filesystem::absolute(r, ec).lexically_normal().string());
    while (roots.back().size() > 1 && roots.back().ends_with('/')) roots.back().pop_back();
    if (auto st = layout::check_import_root(c.paths, roots.back()); !st) return st.err();
  }
  return roots;
}

int cmd_up(context& c) {
  auto want_trainers = trainers_option(c);
  const auto want_replicas = c.a.number("scheduler-replicas");
  const auto want_audits = c.a.number("audit-replicas");
  auto roots = import_roots_option(c);
  if (!roots) return usage("loom up: " + roots.err().message);
  layout::network net;
  split_plan split;
  {  // --site/--cloud/--enrol-token/--zone/--listen/--advertise/--ports/--only/--peer-endpoints
     // as a command line: judged before anything is made or sent
    auto previous = layout::read_endpoints(c.paths.endpoints());
    if (auto st = check_site_options(c, previous ? *previous : layout::endpoints{}); !st)
      return usage("loom up: " + printable(st.err().message));
    auto n = network_option(c, previous ? previous->net : layout::network{});
    if (!n) return usage("loom up: " + printable(n.err().message));
    net = *n;
    auto sp = split_option(c, previous ? *previous : layout::endpoints{});
    if (!sp) return usage("loom up: " + printable(sp.err().message));
    split = *sp;
  }
  ::umask(077);
  if (auto st = files::make_dirs(c.paths.root, 0700); !st) return fail(c, st.err());
  c.paths.root = canonical_dir(c.paths.root);  // the services are told it; `down` recognises them by it
  const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
      c.a.duration("wait").value_or(std::chrono::seconds(30)));  // (0, 3600] s: the table's range
  caller who = presented_caller(c);

  auto lock = dir_lock::take(c.paths, "up");
  if (!lock) {
    if (lock.code() != errc::conflict) return fail(c, lock.err());
    return attach(c, want_trainers, *roots, net, split, wait, who);
  }
  // The data dir is ours: no watcher runs. Stop what a dead one left running.
  layout::endpoints e;
  if (auto eps = layout::read_endpoints(c.paths.endpoints())) {
    e = *eps;
    if (auto left = running_processes(e, c.paths.root); !left.empty()) {
      int stuck = stop_processes(left, c.paths.root);
      std::fprintf(stderr, "note: stopped what a dead watcher left running in %s: %s\n",
                   printable(c.paths.root).c_str(), printable(describe(left)).c_str());
      if (stuck > 0) return fail(c, make_error(errc::internal, "some of them would not stop: " + describe(left)));
    }
  }
  if (auto st = ensure_keys(c.paths); !st) {
    audit_local(c, {"loom.up", who, audit::decision::error, st.err().message, ""});
    return fail(c, st.err());
  }
  // The admin key is readable now; a token presented (--token, $LOOM_TOKEN) must be an admin's too.
  auto admin = require_admin(c, "loom up");
  if (!admin) {
    audit_local(c, {"loom.up", who, audit::decision::deny, admin.err().message, ""});
    return fail(c, admin.err());
  }
  who = *admin;
  if (auto st = files::make_dirs(c.paths.root + "/logs", 0700); !st) return fail(c, st.err());
  // An edge site (--site, or a data dir that ran as one): the cloud's scheduler and aggregator.
  // Only the command line is a usage error; the cloud's refusal of an enrolment is not.
  auto site = plan_site(c, e, who);
  if (!site) return fail(c, site.err());

  // Ports: one ROUTER and one metrics port per process, plus audit's PULL and
  // the second listener of ingest (dataset sync), the aggregator (deltas),
  // each trainer (collective inbox), the scheduler (its change events) and
  // the console (HTTPS), all from --ports when given. Kept across
  // restarts so a restarted service is found where it was.
  if (auto z = c.a.get("zone")) e.zone = *z;
  e.role = *site ? std::string(layout::role_site) : std::string(layout::role_cloud);
  if (*site) e.zone = (*site)->site;
  if (want_trainers) e.trainers = *want_trainers;
  if (want_replicas) e.scheduler_replicas = static_cast<int>(*want_replicas);
  if (want_audits) e.audit_replicas = static_cast<int>(*want_audits);
  if (!roots->empty()) e.import_roots = *roots;
  e.only = split.only;
  e.scheduler_replica = split.replica;
  auto names = layout::process_names(e);
  // Forget trainer-K (scheduler-K) entries beyond the new count (a smaller --trainers than last time).
  std::erase_if(e.services,
                [&](const auto& kv) { return std::find(names.begin(), names.end(), kv.first) == names.end(); });
  e.net = net;
  auto has_data = [](const std::string& name) {
    const auto kind = layout::service_kind(name);
    return kind == "ingest" || kind == "aggregator" || kind == "trainer" || kind == "console" || kind == "scheduler";
  };
  int needed = 0;
  auto has_pull = [](const std::string& name) { return layout::service_kind(name) == "audit"; };
  for (const auto& name : names) needed += 2 + has_pull(name) + has_data(name);
  auto ports = pick_ports(net, needed);
  if (!ports) return fail(c, ports.err());
  std::size_t k = 0;
  const std::string tcp = "tcp://" + net.advertise + ":";
  for (const auto& name : names) {
    auto& s = e.services[name];
    s = layout::service_endpoint{};  // pid, restarts and last exit start again
    s.rpc = tcp + std::to_string((*ports)[k++]);
    s.metrics = net.advertise + ":" + std::to_string((*ports)[k++]);
    s.pull = has_pull(name) ? tcp + std::to_string((*ports)[k++]) : "";
    s.data = has_data(name) ? tcp + std::to_string((*ports)[k++]) : "";
  }
  if (*site)  // not this deployment's processes: no pid, never started or stopped here
    for (const auto& [name, rpc] : (*site)->cloud_rpc) e.services[name] = layout::service_endpoint{rpc, "", "", 0};
  e.watcher_pid = 0;
  if (auto st = keep_peers(c.paths, split); !st) return fail(c, st.err());  // read with endpoints.json (layout.hpp)
  if (auto st = layout::write_endpoints(c.paths.endpoints(), e); !st) return fail(c, st.err());
  // The watcher inherits the lock (the same open file): it is never free in between.
  pid_t w = spawn({bin_dir() + "/loom", "watch", "--data-dir", c.paths.root}, c.paths.watcher_log(), true,
                  lock->fd());
  lock->release();
  if (w < 0) return fail(c, make_error(errc::internal, "could not start the watcher"));
  if (!c.json)
    std::printf("starting EdgeLoom in %s (watcher pid %d)\n", printable(c.paths.root).c_str(), static_cast<int>(w));
  return wait_healthy(c, true, w, wait, who);
}

}  // namespace loom::cli
