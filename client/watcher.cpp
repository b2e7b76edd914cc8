// `loom watch` (internal): the detached local supervisor that `loom up`
// starts. It starts every process in endpoints.json's layout::process_names
// (the five services; with --trainers N, trainer-2 ... trainer-N after the
// trainer) in order, restarts any that dies (with exponential backoff per
// process, reset after a healthy minute), keeps their pids in endpoints.json,
// and on SIGTERM stops them all (SIGTERM, then SIGKILL after 3 s) and exits.
// Single-threaded: signals only set a flag.
#include "client/cli.hpp"
#include "client/procs.hpp"

#include "libs/retry/backoff.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <chrono>
#include <cstdio>
#include <thread>

namespace loom::cli {
namespace {
using clock = std::chrono::steady_clock;

volatile std::sig_atomic_t g_stop = 0;
void on_stop(int) { g_stop = 1; }

// A service that ran this long is considered healthy again: its backoff resets.
constexpr auto stable_after = std::chrono::seconds(60);

struct child {
  std::string name;
  pid_t pid = 0;
  retry::backoff delay{std::chrono::milliseconds(100), std::chrono::milliseconds(5000)};
  clock::time_point start_at{};
  clock::time_point started{};
  std::uint64_t restarts = 0;
};

void log_line(const char* fmt, const std::string& a, long long b = 0) {
  std::fprintf(stderr, fmt, a.c_str(), b);
  std::fflush(stderr);
}

// The same default as service_main's node id: <service>@<hostname>.
std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf[0] ? buf : "localhost";
}

// The command line of process `name`. An extra instance (trainer-2) is told
// its node id and ports; the first of each kind finds its own in endpoints.json.
std::vector<std::string> command_of(const std::string& name, const layout::endpoints& eps, const std::string& root) {
  const std::string kind = layout::service_kind(name);
  std::vector<std::string> argv{bin_dir() + "/" + layout::binary_of(kind)};
  if (kind == "trainer") argv.push_back("serve");
  argv.insert(argv.end(), {"--data-dir", root});
  if (name != kind) {
    const auto* ep = eps.find(name);
    argv.insert(argv.end(), {"--node-id", name + "@" + host_name(), "--bind", ep->rpc, "--metrics", ep->metrics});
  }
  return argv;
}

}  // namespace

int cmd_watch(context& c) {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGHUP, SIG_IGN);

  auto eps = layout::read_endpoints(c.paths.endpoints());
  if (!eps) return fail(c, eps.err());
  std::vector<child> kids;
  for (const auto& n : layout::process_names(*eps)) {
    // An extra instance without its own ports would take its kind's and fail
    // to bind, forever: refuse at start instead (`loom up` writes them).
    const auto* ep = eps->find(n);
    if (n != layout::service_kind(n) && (!ep || ep->rpc.empty() || ep->metrics.empty()))
      return fail(c, make_error(errc::corruption, c.paths.endpoints() + " has no rpc/metrics endpoint for " + n +
                                                      "; run `loom down` then `loom up`"));
    kids.push_back(child{n});
  }
  eps->watcher_pid = ::getpid();
  (void)layout::write_endpoints(c.paths.endpoints(), *eps);

  auto spawn_one = [&](child& k) {
    k.pid = spawn(command_of(k.name, *eps, c.paths.root), c.paths.log(k.name), false);
    k.started = clock::now();
    eps->services[k.name].pid = k.pid;
    log_line("watcher: started %s pid %lld\n", k.name, k.pid);
  };
  for (auto& k : kids) spawn_one(k);
  (void)layout::write_endpoints(c.paths.endpoints(), *eps);

  while (!g_stop) {
    bool changed = false;
    int st = 0;
    pid_t pid;
    while ((pid = ::waitpid(-1, &st, WNOHANG)) > 0) {
      for (auto& k : kids) {
        if (k.pid != pid) continue;
        if (clock::now() - k.started > stable_after) k.delay.reset();
        auto wait = k.delay.next();
        k.start_at = clock::now() + wait;
        k.pid = 0;
        eps->services[k.name].pid = 0;
        ++k.restarts;
        std::fprintf(stderr, "watcher: %s (pid %d) %s %d; restarting in %lld ms\n", k.name.c_str(),
                     static_cast<int>(pid), WIFSIGNALED(st) ? "killed by signal" : "exited with",
                     WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st), static_cast<long long>(wait.count()));
        changed = true;
      }
    }
    for (auto& k : kids) {
      if (k.pid == 0 && clock::now() >= k.start_at && !g_stop) {
        spawn_one(k);
        changed = true;
      }
    }
    if (changed) (void)layout::write_endpoints(c.paths.endpoints(), *eps);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }

  // Stop in reverse start order; audit last so it stores the others' last events.
  for (auto it = kids.rbegin(); it != kids.rend(); ++it)
    if (it->pid > 0) ::kill(it->pid, SIGTERM);
  auto deadline = clock::now() + std::chrono::seconds(3);
  auto alive = [&] {
    int n = 0;
    for (auto& k : kids) {
      if (k.pid <= 0) continue;
      int st = 0;
      if (::waitpid(k.pid, &st, WNOHANG) == k.pid) k.pid = 0;
      else ++n;
    }
    return n;
  };
  while (alive() > 0 && clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (auto& k : kids)
    if (k.pid > 0) {
      log_line("watcher: %s did not stop in 3 s; killing pid %lld\n", k.name, k.pid);
      ::kill(k.pid, SIGKILL);
      ::waitpid(k.pid, nullptr, 0);
      k.pid = 0;
    }
  for (auto& [name, s] : eps->services) s.pid = 0;
  eps->watcher_pid = 0;
  (void)layout::write_endpoints(c.paths.endpoints(), *eps);
  std::fprintf(stderr, "watcher: stopped\n");
  return ok_exit;
}

}  // namespace loom::cli
