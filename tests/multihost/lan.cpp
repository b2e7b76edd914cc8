#include "tests/multihost/lan.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace loom::test {
namespace {
using namespace std::chrono_literals;
constexpr const char* ip_bin = "/usr/sbin/ip";
constexpr const char* nsenter_bin = "/usr/bin/nsenter";
constexpr const char* unshare_bin = "/usr/bin/unshare";
const std::string prefix = "loom-lan-";

bool ip(std::vector<std::string> args, std::string* err = nullptr) {
  args.insert(args.begin(), ip_bin);
  auto r = run(args, 20s);
  if (err) *err = r.err;
  return r.code == 0;
}

std::vector<std::string> with_env(std::vector<std::string> argv, const std::map<std::string, std::string>& env) {
  std::vector<std::string> out{"/usr/bin/env"};
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}
}  // namespace

lan::lan(std::vector<std::string> names) {
  const int pid = static_cast<int>(::getpid());
  root_ = "/tmp/" + prefix + std::to_string(pid);
  sw_ = prefix + std::to_string(pid) + "-sw";
  bridge_ = "l" + std::to_string(pid) + "br";
  subnet_ = "10." + std::to_string(150 + pid % 50) + "." + std::to_string((pid / 50) % 256) + ".";
  int i = 1;
  for (const auto& n : names) {
    lan_host h;
    h.name = n;
    h.ns = prefix + std::to_string(pid) + "-" + n;
    h.ip = subnet_ + std::to_string(i);
    h.port_if = "l" + std::to_string(pid) + "p" + std::to_string(i);
    h.data = root_ + "/" + n + "/data";
    hosts_[n] = h;
    order_.push_back(n);
    ++i;
  }
}

std::string lan::make() {
  if (::geteuid() != 0) return "needs root";
  for (const char* b : {ip_bin, nsenter_bin, unshare_bin})
    if (::access(b, X_OK) != 0) return std::string("needs ") + b;
  std::string err;
  if (!(made_sw_ = ip({"netns", "add", sw_}, &err))) return "ip netns add: " + err;
  for (const auto& args : std::vector<std::vector<std::string>>{{"-n", sw_, "link", "add", bridge_, "type", "bridge"},
                                                                {"-n", sw_, "link", "set", bridge_, "up"},
                                                                {"-n", sw_, "link", "set", "lo", "up"}})
    if (!ip(args, &err)) return "ip " + args[2] + " " + args[3] + " (switch): " + err;
  if (::mkdir(root_.c_str(), 0755) != 0 && errno != EEXIST) return "mkdir " + root_;
  int i = 1;
  for (const auto& name : order_) {
    auto& h = hosts_[name];
    const std::string host_if = "l" + std::to_string(::getpid()) + "h" + std::to_string(i++);
    if (!ip({"netns", "add", h.ns}, &err)) return "ip netns add " + h.ns + ": " + err;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"link", "add", host_if, "type", "veth", "peer", "name", h.port_if},
             {"link", "set", host_if, "netns", h.ns},
             {"link", "set", h.port_if, "netns", sw_},
             {"-n", sw_, "link", "set", h.port_if, "master", bridge_},
             {"-n", sw_, "link", "set", h.port_if, "up"},
             {"-n", h.ns, "addr", "add", h.ip + "/24", "dev", host_if},
             {"-n", h.ns, "link", "set", host_if, "up"},
             {"-n", h.ns, "link", "set", "lo", "up"}})
      if (!ip(args, &err)) return "ip link/addr for " + name + ": " + err;
    // The holder: in the host's network namespace, a mount namespace of its
    // own with a private tmpfs over root_ holding <root>/<name>.
    const std::string script = "mount -t tmpfs -o mode=0755 tmpfs " + root_ + " && mkdir -p " + root_ + "/" + name +
                               " && exec sleep 86400";
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      std::vector<std::string> argv{ip_bin, "netns", "exec", h.ns, unshare_bin, "--mount", "--propagation", "private",
                                    "/bin/sh", "-c", script};
      std::vector<char*> args;
      for (auto& a : argv) args.push_back(a.data());
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
    if (pid < 0) return "fork";
    h.holder = pid;
    // Ready once its tmpfs holds its directory (seen through /proc/<pid>/root).
    struct stat st {};
    bool ready = false;
    for (auto until = std::chrono::steady_clock::now() + 10s; !ready && std::chrono::steady_clock::now() < until;) {
      ready = ::stat(seen_from_outside(h, root_ + "/" + name).c_str(), &st) == 0;
      if (!ready) std::this_thread::sleep_for(20ms);
      if (::waitpid(pid, nullptr, WNOHANG) == pid) {
        h.holder = 0;
        return "the holder of " + name + " exited (mount tmpfs in a mount namespace failed?)";
      }
    }
    if (!ready) return "host " + name + "'s tmpfs did not appear within 10 s";
  }
  return "";
}

run_result lan::exec(const lan_host& h, std::vector<std::string> argv, std::chrono::seconds timeout,
                     const std::map<std::string, std::string>& env) {
  std::vector<std::string> full{nsenter_bin, "-t", std::to_string(h.holder), "-m", "-n", "--"};
  for (auto& a : with_env(std::move(argv), env)) full.push_back(std::move(a));
  return run(full, timeout);
}

run_result lan::exec_net(const lan_host& h, std::vector<std::string> argv, std::chrono::seconds timeout,
                         const std::map<std::string, std::string>& env) {
  std::vector<std::string> full{nsenter_bin, "-t", std::to_string(h.holder), "-n", "--"};
  for (auto& a : with_env(std::move(argv), env)) full.push_back(std::move(a));
  return run(full, timeout);
}

run_result lan::loom(const lan_host& h, std::vector<std::string> args, std::chrono::seconds timeout,
                     const std::map<std::string, std::string>& env) {
  args.insert(args.begin(), bin("loom"));
  args.insert(args.end(), {"--data-dir", h.data});
  return exec(h, std::move(args), timeout, env);
}

std::string lan::seen_from_outside(const lan_host& h, const std::string& path) const {
  return "/proc/" + std::to_string(h.holder) + "/root" + path;
}

void lan::copy_keys(const lan_host& from, const lan_host& to) {
  namespace fs = std::filesystem;
  fs::create_directories(seen_from_outside(to, to.data));
  fs::permissions(seen_from_outside(to, to.data), fs::perms::owner_all);
  fs::copy(seen_from_outside(from, from.data + "/keys"), seen_from_outside(to, to.data + "/keys"),
           fs::copy_options::recursive);
  fs::copy_file(seen_from_outside(from, from.data + "/admin.token"), seen_from_outside(to, to.data + "/admin.token"));
}

std::string lan::copy_endpoints(const lan_host& from, const lan_host& to) {
  const std::string path = root_ + "/" + to.name + "/" + from.name + "-endpoints.json";
  std::filesystem::copy_file(seen_from_outside(from, from.data + "/endpoints.json"), seen_from_outside(to, path),
                             std::filesystem::copy_options::overwrite_existing);
  return path;
}

bool lan::set_link(const lan_host& h, bool up) {
  return ip({"-n", sw_, "link", "set", h.port_if, up ? "up" : "down"});
}

std::pair<std::uint64_t, std::uint64_t> lan::link_bytes(const lan_host& h) {
  auto r = run({ip_bin, "-n", sw_, "-s", "-j", "link", "show", "dev", h.port_if}, 20s);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  if (!j.is_array() || j.empty() || !j[0].contains("stats64")) return {0, 0};
  const auto& s = j[0]["stats64"];
  // The switch port receives what the host sends, and sends what the host receives.
  return {s["rx"].value("bytes", std::uint64_t{0}), s["tx"].value("bytes", std::uint64_t{0})};
}

void lan::stop_deployments() {
  for (const auto& name : order_) {
    auto& h = hosts_[name];
    if (h.holder <= 0) continue;
    struct stat st {};
    if (::stat(seen_from_outside(h, h.data + "/endpoints.json").c_str(), &st) == 0) loom(h, {"down"}, 60s);
    for (long pid : processes_of(h.data)) ::kill(static_cast<pid_t>(pid), SIGKILL);
  }
}

lan::~lan() {
  stop_deployments();
  for (const auto& name : order_) {
    auto& h = hosts_[name];
    if (h.holder > 0) {
      ::kill(h.holder, SIGKILL);
      ::waitpid(h.holder, nullptr, 0);
    }
    ip({"netns", "del", h.ns});  // its veth end goes with it, and the pair with that
  }
  if (made_sw_) ip({"netns", "del", sw_});
  ::rmdir(root_.c_str());
}

void remove_lan_leftovers() {
  auto r = run({ip_bin, "netns", "list"}, 20s);
  std::size_t at = 0;
  while ((at = r.out.find(prefix, at)) != std::string::npos) {
    const auto end = r.out.find_first_of(" \n", at);
    const std::string ns = r.out.substr(at, end - at);
    at += prefix.size();
    const long pid = std::atol(ns.c_str() + prefix.size());
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ip({"netns", "del", ns});
  }
}

}  // namespace loom::test
