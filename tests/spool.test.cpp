// Audit emission through the durable spool, across processes: with the audit
// service down, 1,000 events are emitted and wait in the spool; once audit is
// up they are all stored exactly once. Then audit is killed with -9 while
// another 1,000 stream in and restarted: still every event exactly once.
#include "tests/support/cluster.hpp"

#include "libs/audit/emitter.hpp"
#include "libs/files/files.hpp"
#include "loom/v1/audit.pb.h"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;

namespace {

pid_t start_audit(const std::string& home) {
  pid_t pid = ::fork();
  if (pid == 0) {
    std::string log = home + "/audit.log";
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::string b = bin("loom-audit");
    ::execl(b.c_str(), b.c_str(), "--data-dir", home.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

void stop(pid_t pid, int sig) {
  ::kill(pid, sig);
  ::waitpid(pid, nullptr, 0);
}

// Kills the audit process this test started when a failed REQUIRE leaves early.
struct audit_guard {
  pid_t pid = -1;
  ~audit_guard() {
    if (pid > 0) stop(pid, SIGKILL);
  }
};

// Every stored event of `source`, by seq: each must appear once.
std::map<std::uint64_t, int> stored(zmq::context_t& ctx, const layout::paths& p, const std::string& token,
                                    const std::string& source) {
  auto eps = *layout::read_endpoints(p.endpoints());
  wire::client cli(ctx, eps.find("audit")->rpc, *wire::load_public_key(p.curve_dir(), "audit"),
                   *wire::load_keypair(p.curve_dir(), "client"), wire::client_options{2000ms, 2});
  v1::AuditQueryRequest q;
  q.set_source(source);
  wire::request req{wire::new_request_id(), "loom.v1.AuditQueryRequest", q.SerializeAsString(), token};
  auto rep = cli.call(req);
  REQUIRE(rep.ok());
  REQUIRE_MESSAGE(rep->ok(), rep->message);
  v1::AuditQueryReply r;
  REQUIRE(r.ParseFromString(rep->body));
  std::map<std::uint64_t, int> seen;
  for (auto& e : r.events()) ++seen[e.source_seq()];
  return seen;
}

}  // namespace

TEST_CASE("events emitted while audit is down are stored exactly once when it comes back, also across kill -9") {
  temp_dir home("loom-spool");
  layout::paths p{home.path()};
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  // Endpoints for audit only; nothing is listening yet.
  auto ports = std::vector<int>{};
  {
    layout::endpoints e;
    auto up = run_loom(home.path(), {"status"});  // not running: exit 4, writes nothing
    CHECK(up.code == 4);
    for (int i = 0; i < 3; ++i) ports.push_back(free_port());
    e.services["audit"] = {"tcp://127.0.0.1:" + std::to_string(ports[0]), "127.0.0.1:" + std::to_string(ports[1]),
                           "tcp://127.0.0.1:" + std::to_string(ports[2]), 0};
    REQUIRE(layout::write_endpoints(p.endpoints(), e).ok());
  }
  auto key = *auth::load_token_key(p.token_key());
  auto now = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto token = *auth::issue_token({"spool-test", auth::role::admin, {"*"}, now + 3600, 0, now}, key);
  auto eps = *layout::read_endpoints(p.endpoints());

  zmq::context_t ctx(1);
  audit::emitter_options o;
  o.source = "spool-test@local";
  o.spool_dir = home.path() + "/spool/test";
  o.push_endpoint = eps.find("audit")->pull;
  o.rpc_endpoint = eps.find("audit")->rpc;
  o.server_public = *wire::load_public_key(p.curve_dir(), "audit");
  o.mine = *wire::load_keypair(p.curve_dir(), "client");
  o.token = [&] { return token; };
  o.resend_after = 1000ms;
  auto em = audit::emitter::start(ctx, o);
  REQUIRE(em.ok());
  auto& emitter = **em;

  auto emit = [&](int from, int n) {
    for (int i = from; i < from + n; ++i) {
      audit::record r;
      r.action = "test.event";
      r.request_id = "req-" + std::to_string(i);
      r.principal = "spool-test";
      emitter.emit(std::move(r));
    }
  };

  // 1. Audit down: 1,000 events wait in the durable spool.
  emit(1, 1000);
  REQUIRE(emitter.wait_spooled(10s));
  CHECK(emitter.last_seq() == 1000);
  std::this_thread::sleep_for(500ms);
  CHECK(emitter.confirmed() == 0);
  CHECK(emitter.pending() == 1000);

  // 2. Audit up: all 1,000 are stored, once each.
  audit_guard guard;
  pid_t audit = guard.pid = start_audit(home.path());
  CHECK(emitter.wait_confirmed(30s));
  auto seen = stored(ctx, p, token, o.source);
  CHECK(seen.size() == 1000);
  int dup = 0;
  for (auto& [seq, n] : seen) dup += n != 1;
  CHECK(dup == 0);
  CHECK(seen.begin()->first == 1);
  CHECK(seen.rbegin()->first == 1000);

  // 3. kill -9 audit while another 1,000 stream in; restart it.
  std::thread producer([&] {
    for (int k = 0; k < 10; ++k) {
      emit(1001 + k * 100, 100);
      std::this_thread::sleep_for(20ms);
    }
  });
  std::this_thread::sleep_for(80ms);
  stop(audit, SIGKILL);
  guard.pid = -1;
  producer.join();
  std::this_thread::sleep_for(300ms);
  audit = guard.pid = start_audit(home.path());
  CHECK(emitter.wait_confirmed(30s));
  seen = stored(ctx, p, token, o.source);
  CHECK(seen.size() == 2000);
  dup = 0;
  for (auto& [seq, n] : seen) dup += n != 1;
  CHECK(dup == 0);
  CHECK(seen.rbegin()->first == 2000);
  stop(audit, SIGTERM);
  guard.pid = -1;
  // The chain the killed and restarted writer left verifies, anchors included
  // (a clean stop signs the tail).
  auto v = run_loom(home.path(), {"audit", "verify"});
  INFO(v.out << v.err);
  CHECK(v.code == 0);
  CHECK(v.out.find("2000 rows") != std::string::npos);
}
