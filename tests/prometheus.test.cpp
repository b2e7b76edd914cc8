// A real Prometheus (Debian's server) scrapes all five services' /metrics on
// loopback; the common metrics are queryable through its HTTP API.
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

#include <cmath>
#include <cstdio>
#include <fstream>
#include <thread>

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
}  // namespace

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
