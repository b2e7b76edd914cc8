// `loom watch` (internal): the detached local supervisor that `loom up`
// starts. It holds the data dir lock for its whole life (dir_lock.hpp: one
// watcher per data dir), starts every process in endpoints.json's
// layout::process_names (the six services; with --trainers N, trainer-2 ...
// trainer-N after the trainer) in order, restarts any that dies (with
// exponential backoff per process, reset after a healthy minute), and keeps
// in endpoints.json each one's pid, restart count, how the last one ended and
// its last output lines (what `loom up` reports when a service cannot start,
// and `loom status` shows). On SIGTERM it stops them all (SIGTERM, then
// SIGKILL after 3 s) and exits. Runs under umask 077. Single-threaded:
// signals only set a flag.
#include "client/cli.hpp"
#include "client/dir_lock.hpp"
#include "client/procs.hpp"

#include "libs/retry/backoff.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
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
// What of a dead process's output is kept in endpoints.json: its last lines,
// enough for the error that ended it, bounded so the file stays small.
constexpr int error_lines = 3;
constexpr off_t error_tail_bytes = 4096;

struct child {
  std::string name;
  pid_t pid = 0;
  retry::backoff delay{std::chrono::milliseconds(100), std::chrono::milliseconds(5000)};
  clock::time_point start_at{};
  clock::time_point started{};
  off_t log_from = 0;  // the log's size when this process started: its output follows
};

void log_line(const char* fmt, const std::string& a, long long b = 0) {
  std::fprintf(stderr, fmt, a.c_str(), b);
  std::fflush(stderr);
}

off_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

// The last non-empty lines `log` got since byte `from`, joined with newlines.
std::string last_lines(const std::string& log, off_t from) {
  int fd = ::open(log.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  const off_t size = file_size(log);
  from = std::max(from, size - error_tail_bytes);
  std::string text(static_cast<std::size_t>(std::max<off_t>(0, size - from)), '\0');
  ssize_t n = text.empty() ? 0 : ::pread(fd, text.data(), text.size(), from);
  ::close(fd);
  text.resize(static_cast<std::size_t>(std::max<ssize_t>(0, n)));
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < text.size()) {
    auto nl = text.find('\n', at);
    auto line = text.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
    if (!line.empty()) lines.push_back(line);
    at = nl == std::string::npos ? text.size() : nl + 1;
  }
  std::string out;
  for (std::size_t i = lines.size() > error_lines ? lines.size() - error_lines : 0; i < lines.size(); ++i)
    out += (out.empty() ? "" : "\n") + lines[i];
  return out;
}

// The command line of process `name`. An extra instance (trainer-2) is told
// its node id and ports; the first of each kind finds its own in endpoints.json.
std::vector<std::string> command_of(const std::string& name, const layout::endpoints& eps, const std::string& root) {
  const std::string kind = layout::service_kind(name);
  std::vector<std::string> argv{bin_dir() + "/" + layout::binary_of(kind)};
  if (kind == "trainer") argv.push_back("serve");
  argv.insert(argv.end(), {"--data-dir", root});
  // An edge site's nodes live in the cloud's roster beside the cloud's own and
  // other sites' (on one machine too): <name>@<site>.<host>, unique per site.
  const std::string host = eps.is_site() ? eps.zone + "." + host_name() : host_name();
  if (name != kind) {
    const auto* ep = eps.find(name);
    argv.insert(argv.end(), {"--node-id", name + "@" + host, "--bind", layout::bind_of(eps.net, ep->rpc), "--metrics",
                             layout::bind_of(eps.net, ep->metrics)});
    if (!ep->data.empty()) argv.insert(argv.end(), {"--data", ep->data});
  } else if (eps.is_site()) {
    argv.insert(argv.end(), {"--node-id", name + "@" + host});
  }
  return argv;
}

}  // namespace

int cmd_watch(context& c) {
  ::umask(077);
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, nullptr);
  ::sigaction(SIGINT, &sa, nullptr);
  ::signal(SIGHUP, SIG_IGN);

  auto lock = dir_lock::inherit_or_take(c.paths, "watch");
  if (!lock) return fail(c, make_error(errc::conflict, "not watching: " + lock.err().message));
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
  // endpoints.json is how `loom status`, `loom down` and the next `loom up`
  // find the processes: a write that fails (a full disk) is tried again each
  // second until one lands, so the file never keeps a stale pid for long.
  bool unsaved = false;
  auto next_save = clock::now();
  auto save = [&] {
    auto s = layout::write_endpoints(c.paths.endpoints(), *eps);
    if (s.ok() && unsaved) std::fprintf(stderr, "watcher: %s written again\n", c.paths.endpoints().c_str());
    if (!s.ok() && !unsaved)
      std::fprintf(stderr, "watcher: %s not written (%s); trying again each second\n", c.paths.endpoints().c_str(),
                   s.err().to_string().c_str());
    std::fflush(stderr);
    unsaved = !s.ok();
    next_save = clock::now() + std::chrono::seconds(1);
  };
  save();

  // Each pid is in endpoints.json as soon as it exists: if this watcher is
  // killed, the next `loom up` or `loom down` finds every process it left.
  auto spawn_one = [&](child& k) {
    k.log_from = file_size(c.paths.log(k.name));
    k.pid = spawn(command_of(k.name, *eps, c.paths.root), c.paths.log(k.name), false);
    k.started = clock::now();
    if (k.pid < 0) {  // fork failed: try again in a second
      k.pid = 0;
      k.start_at = k.started + std::chrono::seconds(1);
      return;
    }
    eps->services[k.name].pid = k.pid;
    save();
    log_line("watcher: started %s pid %lld\n", k.name, k.pid);
  };
  for (auto& k : kids) spawn_one(k);

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
        auto& rec = eps->services[k.name];
        rec.pid = 0;
        ++rec.restarts;
        rec.last_exit = WIFSIGNALED(st) ? "killed by signal " + std::to_string(WTERMSIG(st))
                                        : "exited with " + std::to_string(WEXITSTATUS(st));
        rec.last_error = last_lines(c.paths.log(k.name), k.log_from);
        std::fprintf(stderr, "watcher: %s (pid %d) %s; restarting in %lld ms\n", k.name.c_str(),
                     static_cast<int>(pid), rec.last_exit.c_str(), static_cast<long long>(wait.count()));
        changed = true;
      }
    }
    if (changed || (unsaved && clock::now() >= next_save)) save();
    for (auto& k : kids)
      if (k.pid == 0 && clock::now() >= k.start_at && !g_stop) spawn_one(k);
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
