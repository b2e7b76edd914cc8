// A site behind a real network link that is cut and restored (issue 15 §5;
// this kernel has no netem, so the cut is a veth pair set down). The test
// makes a network namespace and a veth pair (names and subnet from its pid),
// runs the aggregator (engine + delta server, in this process) on the host
// end, three synthetic sites as threads on the host and site 2 as its own
// process inside the namespace (`ip netns exec`, tests/diloco_links/
// netns_site.cpp). It sets the namespace's end down for 3 s and up again: site 2
// trains on through the cut, the other sites' rounds close without it, and
// site 2 reconnects by itself, catches up and has its deltas accepted again.
// Root and `ip netns` only: otherwise skipped (LOOM_TEST_SKIPPED), never faked.
// Only traffic on the test's own veth pair and namespace.
#include "libs/files/files.hpp"
#include "loom/v1/aggregator.pb.h"
#include "tests/diloco_links/harness.hpp"
#include "tests/support/harness.hpp"

#include <doctest/doctest.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace loom;
using namespace loom::test;
using namespace loom::test::links;
using namespace std::chrono_literals;

namespace {

constexpr int sites = 4;
constexpr int ns_site = 2;

bool ip(const std::vector<std::string>& args, std::string* err = nullptr) {
  std::vector<std::string> argv{"/usr/sbin/ip"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run(argv, 20s);
  if (err) *err = r.err;
  return r.code == 0;
}

// The namespace, the veth pair and the child: made in this order, undone in
// reverse on scope exit, whatever happened (a failed REQUIRE included).
struct netns_link {
  std::string ns, host_if, ns_if, host_ip, ns_ip;
  pid_t child = 0;
  bool made_ns = false, made_link = false;

  explicit netns_link(int pid) {
    ns = "loom-links-" + std::to_string(pid);
    host_if = "lkh" + std::to_string(pid);  // <= 15 characters (IFNAMSIZ)
    ns_if = "lkn" + std::to_string(pid);
    const std::string net = "10." + std::to_string(200 + pid % 50) + "." + std::to_string((pid / 50) % 256) + ".";
    host_ip = net + "1";
    ns_ip = net + "2";
  }
  // Empty when made; else why not.
  std::string make() {
    std::string err;
    if (!(made_ns = ip({"netns", "add", ns}, &err))) return "ip netns add: " + err;
    if (!(made_link = ip({"link", "add", host_if, "type", "veth", "peer", "name", ns_if}, &err))) return "ip link add veth: " + err;
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"link", "set", ns_if, "netns", ns},
             {"addr", "add", host_ip + "/30", "dev", host_if},
             {"link", "set", host_if, "up"},
             {"netns", "exec", ns, "ip", "addr", "add", ns_ip + "/30", "dev", ns_if},
             {"netns", "exec", ns, "ip", "link", "set", ns_if, "up"},
             {"netns", "exec", ns, "ip", "link", "set", "lo", "up"}})
      if (!ip(args, &err)) return "ip " + args[0] + " " + args[1] + " " + args[2] + ": " + err;
    return "";
  }
  ~netns_link() {
    if (child > 0) {
      ::kill(child, SIGKILL);
      ::waitpid(child, nullptr, 0);
    }
    if (made_link) ip({"link", "del", host_if});  // deletes both ends
    if (made_ns) ip({"netns", "del", ns});
  }
};

// Namespaces and veth pairs of earlier runs of this test that were killed
// (SIGKILL skips destructors): loom-links-<pid> whose process is gone.
void remove_leftovers() {
  auto r = run({"/usr/sbin/ip", "netns", "list"}, 20s);
  std::size_t at = 0;
  const std::string prefix = "loom-links-";
  while ((at = r.out.find(prefix, at)) != std::string::npos) {
    const long pid = std::atol(r.out.c_str() + at + prefix.size());
    at += prefix.size();
    if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) == 0 || errno != ESRCH) continue;
    ip({"link", "del", "lkh" + std::to_string(pid)});
    ip({"netns", "del", prefix + std::to_string(pid)});
  }
}

// argv in the namespace, stdout to `out`; the child's pid.
pid_t spawn_in(const std::string& ns, std::vector<std::string> argv, const std::string& out) {
  argv.insert(argv.begin(), {"/usr/sbin/ip", "netns", "exec", ns});
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDONLY);
    if (fd < 0 || null < 0) ::_exit(126);
    ::dup2(null, 0);
    ::dup2(fd, 1);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

struct child_progress {
  int steps = 0;
  std::uint64_t version = 0;  // min over fragments, last step
  std::string done;           // the summary line, once there
};

child_progress progress(const std::string& out) {
  child_progress p;
  auto text = files::read_file(out);
  if (!text) return p;
  std::size_t at = 0;
  while (at < text->size()) {
    const auto end = text->find('\n', at);
    if (end == std::string::npos) break;  // a line being written
    const std::string line = text->substr(at, end - at);
    at = end + 1;
    if (line.rfind("done ", 0) == 0) p.done = line;
    if (line.rfind("step=", 0) != 0) continue;
    p.steps = std::atoi(line.c_str() + 5);
    const auto v = line.find("versions=");
    if (v == std::string::npos) continue;
    std::uint64_t lo = UINT64_MAX;
    for (const char* c = line.c_str() + v + 9; *c;) {
      char* end = nullptr;
      lo = std::min<std::uint64_t>(lo, std::strtoull(c, &end, 10));
      if (end == c || *end != ',') break;
      c = end + 1;
    }
    p.version = lo == UINT64_MAX ? 0 : lo;
  }
  return p;
}

std::uint64_t global_version(const local_aggregator& a) { return std::min(a.version(0), a.version(1)); }

}  // namespace

TEST_CASE("a site in a network namespace whose veth link is cut for 3 s trains on, reconnects by itself and is counted again, and the other sites' rounds never stop") {
  if (::geteuid() != 0 || ::access("/usr/sbin/ip", X_OK) != 0) {
    MESSAGE("LOOM_TEST_SKIPPED: needs root and /usr/sbin/ip (iproute2) for a network namespace and a veth pair");
    return;
  }
  remove_leftovers();
  netns_link link(static_cast<int>(::getpid()));
  if (const std::string why = link.make(); !why.empty()) {
    MESSAGE("LOOM_TEST_SKIPPED: cannot make a network namespace and veth pair here: " << why);
    return;
  }
  aggregator_options ao;
  ao.bind = "tcp://" + link.host_ip + ":*";
  auto agg = local_aggregator::start(ao);
  REQUIRE_MESSAGE(agg.ok(), agg.err().message);
  auto& a = **agg;
  const auto where = a.address();
  INFO("aggregator at " << where.endpoint << ", namespace " << link.ns);

  temp_dir dir("loom-netns");
  const std::string out = dir.path() + "/site-2.out";
  constexpr int steps = 500;  // 10 s of 20 ms steps: ~3.5 before the cut, 3 cut, ~3.5 after
  link.child = spawn_in(link.ns,
                        {bin("diloco_netns_site"), "--endpoint", where.endpoint, "--server-public", where.public_key,
                         "--public", a.site_keys(ns_site).public_z85, "--secret", a.site_keys(ns_site).secret_z85,
                         "--job", a.job(), "--site", site_name(ns_site), "--index", std::to_string(ns_site),
                         "--steps", std::to_string(steps)},
                        out);
  REQUIRE(link.child > 0);
  std::vector<site_result> results(sites);
  std::vector<std::thread> pool;
  const auto origin = clock::now();
  for (int s = 0; s < sites; ++s) {
    if (s == ns_site) continue;
    pool.emplace_back([&, s] {
      site_options o;
      o.where = where;
      o.keys = a.site_keys(s);
      o.job = a.job();
      o.site = site_name(s);
      o.index = s;
      o.steps = steps + 100;  // still training when site 2 finishes
      results[s] = run_site(o, origin);
    });
  }
  struct joiner {
    std::vector<std::thread>& pool;
    ~joiner() {
      for (auto& t : pool)
        if (t.joinable()) t.join();
    }
  } join_all{pool};

  // Site 2 joined and merged four versions (the rounds' deadlines, derived
  // from arrival times, have samples by then): cut its link.
  child_progress before;
  for (auto until = clock::now() + 30s; clock::now() < until; std::this_thread::sleep_for(50ms))
    if ((before = progress(out)).version >= 4 || !before.done.empty()) break;
  REQUIRE_MESSAGE(before.version >= 4, "site 2 did not sync through the veth link: " << before.done);
  const std::uint64_t v_cut = global_version(a);
  // The namespace's end goes down: the host end loses its carrier but keeps
  // its address (setting the host end down would take 10.x.y.1 away from the
  // host's own sites too).
  REQUIRE(ip({"netns", "exec", link.ns, "ip", "link", "set", link.ns_if, "down"}));
  std::this_thread::sleep_for(3s);
  const child_progress during = progress(out);
  const std::uint64_t v_restore = global_version(a);
  const std::int64_t held_at_restore = std::max(a.last_round(site_name(ns_site), 0), a.last_round(site_name(ns_site), 1));
  REQUIRE(ip({"netns", "exec", link.ns, "ip", "link", "set", link.ns_if, "up"}));
  const auto restored = clock::now();

  // Site 2 comes back by itself: it reaches the global version of the moment of the restore.
  double caught_s = -1;
  for (auto until = clock::now() + 30s; clock::now() < until; std::this_thread::sleep_for(50ms)) {
    const auto p = progress(out);
    if (p.version >= v_restore) {
      caught_s = std::chrono::duration<double>(clock::now() - restored).count();
      break;
    }
    if (!p.done.empty()) break;
  }
  int code = -1;
  for (auto until = clock::now() + 60s; clock::now() < until && code < 0; std::this_thread::sleep_for(50ms)) {
    int st = 0;
    if (::waitpid(link.child, &st, WNOHANG) == link.child) code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  if (code >= 0) link.child = 0;
  for (auto& t : pool) t.join();
  const child_progress after = progress(out);
  MESSAGE("site 2: step " << before.steps << " at the cut, " << during.steps << " at the restore, caught up in "
                          << caught_s << " s; global version " << v_cut << " -> " << v_restore << " during the cut; "
                          << after.done);
  REQUIRE(code == 0);
  CHECK(after.done.find("ok=1") != std::string::npos);
  // It trained on while cut (3 s of 20 ms steps, less the requests that timed out) ...
  CHECK(during.steps >= before.steps + 60);
  // ... the others' rounds closed without it ...
  CHECK(v_restore >= v_cut + 2);
  // ... it noticed, reconnected by itself and caught up with the global parameters ...
  CHECK(after.done.find("unreachable=0 ") == std::string::npos);
  CHECK(caught_s >= 0);
  CHECK(caught_s <= 30);
  // ... and its deltas count again: the job holds a round of it after the restore.
  const std::int64_t held_after = std::max(a.last_round(site_name(ns_site), 0), a.last_round(site_name(ns_site), 1));
  CHECK(held_after > held_at_restore);
  CHECK(held_after >= static_cast<std::int64_t>(v_restore));
  for (int s = 0; s < sites; ++s)
    if (s != ns_site) CHECK_MESSAGE(results[s].outcome.ok(), site_name(s) << ": " << results[s].outcome.err().message);
  // Only deltas and control messages crossed to the aggregator.
  const auto final_status = a.status();
  for (const auto& [type, n] : final_status.frames_received())
    CHECK_MESSAGE((type == "DeltaHeader" || type == "DeltaJoin" || type == "GlobalPull" || type == "RoundStatusQuery"), type);
}
