// A real Prometheus (Debian's server) scrapes all six services' /metrics on
// loopback; the common metrics are queryable through its HTTP API. A
// service's /metrics stays scrapable while hundreds of idle connections are
// held open against it, and drops them after its request timeout.
#include "tests/support/cluster.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <poll.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>
#include <vector>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
using json = nlohmann::json;

namespace {
// Value of a single-sample instant query, or NaN.
double query(const std::string& web, const std::string& promql) {
  std::string q;
  for (char ch : promql) {
    if (std::isalnum(static_cast<unsigned char>(ch)) || ch == '_') q += ch;
    else {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", static_cast<unsigned char>(ch));
      q += b;
    }
  }
  auto body = http_get(web, "/api/v1/query?query=" + q);
  auto j = json::parse(body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nan("");
  auto& r = j["data"]["result"];
  if (!r.is_array() || r.empty()) return std::nan("");
  return std::stod(r[0]["value"][1].get<std::string>());
}
// A TCP connection to host:port that sends nothing; -1 when it cannot be
// made within 2 s (a listener that stopped accepting: its backlog is full).
int idle_connection(const std::string& host_port) {
  auto colon = host_port.rfind(':');
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval tv{2, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);  // bounds connect() too
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<std::uint16_t>(std::atoi(host_port.c_str() + colon + 1)));
  ::inet_pton(AF_INET, host_port.substr(0, colon).c_str(), &a.sin_addr);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}
}  // namespace

TEST_CASE("a service's /metrics answers within 2 s while 250 idle connections are held open, and drops them later") {
  cluster c;
  REQUIRE(c.up);
  const std::string ep = c.ep("scheduler").metrics;
  std::vector<int> idle;
  for (int i = 0; i < 250; ++i) {
    int fd = idle_connection(ep);
    if (fd < 0) {
      for (int open : idle) ::close(open);
      FAIL("idle connection " << i + 1 << " to " << ep << " not accepted within 2 s");
    }
    idle.push_back(fd);
  }
  std::this_thread::sleep_for(300ms);  // all accepted, none asking
  for (int round = 0; round < 5; ++round) {
    auto t0 = std::chrono::steady_clock::now();
    auto body = http_get(ep, "/metrics", 2000ms);
    auto took = std::chrono::steady_clock::now() - t0;
    INFO("round " << round);
    CHECK(body.find("loom_scheduler_up 1") != std::string::npos);
    CHECK(took < 2s);
  }
  // The idle ones are closed by the service after its 5 s request timeout.
  int closed = 0;
  auto until = std::chrono::steady_clock::now() + 15s;
  for (int fd : idle) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    char ch;
    if (::poll(&p, 1, static_cast<int>(std::max<long>(0, left.count()))) == 1 && ::recv(fd, &ch, 1, 0) <= 0) ++closed;
    ::close(fd);
  }
  CHECK(closed == 250);
  CHECK(http_get(ep, "/metrics").find("loom_scheduler_up 1") != std::string::npos);
}

TEST_CASE("prometheus scrapes every service and sees it up with its request counters") {
  REQUIRE_MESSAGE(::access("/usr/bin/prometheus", X_OK) == 0, "prometheus is not installed (scripts/setup installs it)");
  cluster c;
  REQUIRE(c.up);
  temp_dir prom("loom-prom");
  std::ofstream cfg(prom.path() + "/prometheus.yml");
  cfg << "global: {scrape_interval: 1s, evaluation_interval: 1s}\nscrape_configs:\n";
  for (auto name : layout::service_names)
    cfg << "  - job_name: " << name << "\n    static_configs: [{targets: ['" << c.ep(std::string(name)).metrics
        << "']}]\n";
  cfg.close();
  std::string web = "127.0.0.1:" + std::to_string(free_port());
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open((prom.path() + "/prometheus.log").c_str(), O_WRONLY | O_CREAT, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl("/usr/bin/prometheus", "prometheus", ("--config.file=" + prom.path() + "/prometheus.yml").c_str(),
            ("--storage.tsdb.path=" + prom.path() + "/data").c_str(), ("--web.listen-address=" + web).c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Traffic worth counting.
  CHECK(run_loom(c.home.path(), {"ping"}).code == 0);
  bool all_up = false;
  for (int i = 0; i < 60 && !all_up; ++i) {
    std::this_thread::sleep_for(500ms);
    all_up = true;
    for (auto name : layout::service_names)
      all_up = all_up && query(web, "loom_" + std::string(name) + "_up") == 1.0 &&
               query(web, "up{job=\"" + std::string(name) + "\"}") == 1.0;
  }
  CHECK(all_up);
  CHECK(query(web, "sum(loom_scheduler_requests_total{type=\"loom.v1.RegisterNodeRequest\",code=\"ok\"})") >= 5);
  CHECK(query(web, "sum(loom_trainer_requests_total{type=\"loom.v1.PingRequest\"})") >= 1);
  CHECK(query(web, "loom_audit_restarts_total") == 0);
  ::kill(pid, SIGTERM);
  ::waitpid(pid, nullptr, 0);
}
