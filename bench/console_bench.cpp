// console_bench: the web console's latency through the real services on
// loopback (issue 29: p99 <= 300 ms). `loom up` in a throwaway data dir, a
// few jobs so the lists are not empty, then `clients` threads, each with its
// own logged-in session over HTTPS (TLS 1.3, keep-alive, the console's own
// certificate trusted), request every page and every read-only API route
// round-robin for `seconds`. Then the live stream: from a topology change (a
// site's enrolment token issued) to its event arriving at a subscribed
// client, `changes` times.
//
//   console_bench [--clients N] [--seconds S] [--changes K]   (default 20, 10, 10)
//   case=api clients=20 requests=… p50_ms=… p99_ms=… rps=… errors=…
//   case=topology changes=10 update_ms=… (median) max_ms=…
#include "bench/bench_util.hpp"
#include "tests/support/console_client.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace loom;
using clock_type = std::chrono::steady_clock;

namespace {

int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

double pct(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * static_cast<double>(v.size())))];
}

}  // namespace

int main(int argc, char** argv) {
  const int clients = std::max(1, arg_int(argc, argv, "--clients", 20));
  const int seconds = std::max(1, arg_int(argc, argv, "--seconds", 10));
  const int changes = std::max(1, arg_int(argc, argv, "--changes", 10));
  test::cluster c({"--import-root", "/usr/share/common-licenses"});
  if (!c.up) {
    std::fprintf(stderr, "console_bench: loom up failed (see %s/logs)\n", c.home.path().c_str());
    return 1;
  }
  auto admin = test::console_login(c, c.admin());
  if (admin.cookie.empty()) {
    std::fprintf(stderr, "console_bench: log-in failed\n");
    return 1;
  }
  // A few jobs (a gang larger than the deployment: queued, never placed) so every list has rows.
  for (int i = 0; i < 5; ++i)
    admin.post("/api/jobs", {{"template", "pipeline-test"},
                             {"overrides", {"text=/usr/share/common-licenses/GPL-3", "trainers=64", "train.grad_accum=64"}}});
  auto [jst, jobs] = admin.get("/api/jobs");
  const std::string job = jst == 200 && !jobs["jobs"].empty() ? jobs["jobs"][0]["id"].get<std::string>() : "none";
  const std::vector<std::string> routes = {"/",           "/app.js",       "/app.css",      "/api/session",
                                           "/api/overview", "/api/topology", "/api/jobs",     "/api/jobs/" + job,
                                           "/api/templates", "/api/nodes",  "/api/sites",    "/api/models",
                                           "/api/datasets", "/api/audit?limit=50"};

  std::mutex mu;
  std::vector<double> lat;
  std::atomic<int> errors{0};
  const auto end = clock_type::now() + std::chrono::seconds(seconds);
  std::vector<std::thread> ts;
  for (int k = 0; k < clients; ++k)
    ts.emplace_back([&, k] {
      auto s = test::console_login(c, c.admin());
      auto cli = s.client();  // one connection per client, kept alive
      std::vector<double> mine;
      for (std::size_t i = static_cast<std::size_t>(k); clock_type::now() < end; ++i) {
        const auto t0 = clock_type::now();
        auto r = cli->Get(routes[i % routes.size()].c_str(), s.headers());
        mine.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
        if (!r || r->status != 200) ++errors;
      }
      std::lock_guard lk(mu);
      lat.insert(lat.end(), mine.begin(), mine.end());
    });
  for (auto& t : ts) t.join();
  const std::size_t n = lat.size();
  const double p50 = pct(lat, 0.50), p99 = pct(lat, 0.99);
  std::printf("case=api clients=%d requests=%zu p50_ms=%.2f p99_ms=%.2f rps=%.1f errors=%d\n", clients, n, p50, p99,
              static_cast<double>(n) / seconds, errors.load());
  std::fflush(stdout);

  // The live stream: a change to the topology (a new site) to its event.
  test::event_stream stream(admin);
  stream.wait_for("event: topology", std::chrono::seconds(10));
  std::vector<double> updates;
  for (int i = 0; i < changes; ++i) {
    const std::string site = "bench-site-" + std::to_string(i);
    const auto t0 = clock_type::now();
    admin.post("/api/sites/token", {{"site", site}});
    stream.wait_for("\"name\":\"" + site + "\"", std::chrono::seconds(10));
    updates.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  admin.post("/api/logout");  // ends the stream within one tick
  stream.stop();
  const double worst = *std::max_element(updates.begin(), updates.end());
  std::printf("case=topology changes=%d update_ms=%.1f max_ms=%.1f\n", changes, pct(updates, 0.5), worst);
  return 0;
}
