// Process helpers of the local launcher (procs.hpp).
#include "client/procs.hpp"

#include "libs/layout/layout.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace loom::cli {

std::string bin_dir() {
  if (const char* d = std::getenv("LOOM_BIN_DIR"); d && *d) return d;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : exe.parent_path().string();
}

pid_t spawn(const std::vector<std::string>& argv, const std::string& log, bool new_session, int pass_fd) {
  // Built before fork: the child may only make async-signal-safe calls.
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  if (new_session) ::setsid();
  int in = ::open("/dev/null", O_RDONLY);
  int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
  // Move the passed fd out of the way of 0..2 first, then to 3 (dup2 clears close-on-exec).
  int keep = pass_fd >= 0 ? ::fcntl(pass_fd, F_DUPFD, 10) : -1;
  if (in >= 0) ::dup2(in, 0);
  if (out >= 0) {
    ::dup2(out, 1);
    ::dup2(out, 2);
  }
  if (keep >= 0) ::dup2(keep, 3);
  for (int fd = keep >= 0 ? 4 : 3; fd < 4096; ++fd) ::close(fd);
  ::execv(args[0], args.data());
  ::_exit(127);
}

namespace {
// True while `pid` exists and is not a zombie.
bool running(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  return !(close != std::string::npos && close + 2 < line.size() && line[close + 2] == 'Z');
}

std::vector<std::string> cmdline_of(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string arg;
  while (std::getline(f, arg, '\0')) out.push_back(arg);
  return out;
}

// The value after `--name` (or of `--name=value`); "" when absent.
std::string option_of(const std::vector<std::string>& argv, const std::string& name) {
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == name && i + 1 < argv.size()) return argv[i + 1];
    if (argv[i].rfind(name + "=", 0) == 0) return argv[i].substr(name.size() + 1);
  }
  return "";
}
}  // namespace

std::string canonical_dir(const std::string& dir) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(dir, ec), ec);
  return ec ? dir : p.string();
}

bool is_process_of(pid_t pid, const std::string& root, const std::string& name) {
  if (!running(pid)) return false;
  const auto argv = cmdline_of(pid);
  if (argv.size() < 2) return false;
  const std::string exe = std::filesystem::path(argv[0]).filename().string();
  const std::string dir = option_of(argv, "--data-dir");
  if (dir.empty() || canonical_dir(dir) != canonical_dir(root)) return false;
  if (name == "watcher") return exe == "loom" && argv[1] == "watch";
  const std::string kind = layout::service_kind(name);
  if (kind.empty() || exe != layout::binary_of(kind)) return false;
  if (kind == "trainer" && argv[1] != "serve") return false;
  // An extra instance is told its node id; the first of a kind is not.
  const std::string node = option_of(argv, "--node-id");
  const std::string instance = node.empty() ? kind : node.substr(0, node.find('@'));
  return instance == name;
}

bool stop_process_of(pid_t pid, const std::string& root, const std::string& name, int term_ms) {
  if (!is_process_of(pid, root, name)) return true;
  ::kill(pid, SIGTERM);
  for (int waited = 0; waited < term_ms; waited += 20) {
    if (!is_process_of(pid, root, name)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (is_process_of(pid, root, name)) ::kill(pid, SIGKILL);
  for (int waited = 0; waited < 2000; waited += 20) {
    if (!is_process_of(pid, root, name)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !is_process_of(pid, root, name);
}

std::vector<deployed_process> running_processes(const layout::endpoints& e, const std::string& root) {
  std::vector<deployed_process> out;
  if (is_process_of(static_cast<pid_t>(e.watcher_pid), root, "watcher"))
    out.push_back({"watcher", static_cast<pid_t>(e.watcher_pid)});
  auto names = layout::process_names(e);
  for (const auto& [name, s] : e.services)  // entries of an earlier, larger --trainers too
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  for (const auto& name : names)
    if (const auto* s = e.find(name); s && is_process_of(static_cast<pid_t>(s->pid), root, name))
      out.push_back({name, static_cast<pid_t>(s->pid)});
  return out;
}

int stop_processes(std::vector<deployed_process>& ps, const std::string& root) {
  // The watcher's own stop takes up to 3 s per round of its services.
  for (auto& p : ps)
    if (p.name == "watcher") p.stopped = stop_process_of(p.pid, root, p.name, 10000);
  for (auto it = ps.rbegin(); it != ps.rend(); ++it)  // audit last: it stores the others' last events
    if (it->name != "watcher" && is_process_of(it->pid, root, it->name)) ::kill(it->pid, SIGTERM);
  int left = 0;
  for (auto& p : ps) {
    if (p.name != "watcher") p.stopped = stop_process_of(p.pid, root, p.name, 5000);
    left += !p.stopped;
  }
  return left;
}

std::string describe(const std::vector<deployed_process>& ps) {
  std::string out;
  for (const auto& p : ps) out += (out.empty() ? "" : ", ") + p.name + " (pid " + std::to_string(p.pid) + ")";
  return out;
}

std::string host_name() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf[0] ? buf : "localhost";
}

}  // namespace loom::cli
