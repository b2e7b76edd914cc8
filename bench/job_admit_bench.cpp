// job_admit_bench: job admissions per second through the real services on
// loopback (issue 6: >= 1,000/s). `loom up` in a throwaway data dir (the
// embedded SQLite store), jobs needing a gang larger than the deployment so
// nothing is placed, then
// `clients` threads each submit jobs back to back over CURVE ZeroMQ as an
// operator: every admission is authorised, validated (template + overrides),
// stored in the job tables, queued in the policy and audited (its reply held
// until the audit record is durable in the spool), exactly as `loom job
// submit` does. Afterwards every job must be listed once.
//
//   job_admit_bench [--jobs N] [--clients C]        (default 4000 jobs, 16 clients)
//   case=admit jobs=4000 clients=16 admissions_per_s=… p50_ms=… p99_ms=…
//        scheduler_cpu_us_per_job=… audit_cpu_us_per_job=… load=…
// The CPU figures (the two services' user + system time over the submissions,
// per job) are what to compare across builds on a shared box: wall-clock
// throughput there moves with the other load by ±15%.
#include "bench/bench_util.hpp"
#include "libs/wire/client.hpp"
#include "loom/v1/jobs.pb.h"
#include "tests/support/cluster.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

using namespace loom;
using clock_type = std::chrono::steady_clock;

namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(LOOM_SOURCE_DIR) + "/templates/" + name + ".toml");
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

int arg_int(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int jobs = std::max(1, arg_int(argc, argv, "--jobs", 4000));
  const int clients = std::max(1, arg_int(argc, argv, "--clients", 16));
  test::cluster c({"--import-root", "/usr/share/common-licenses"});  // the job's text= file is read from there
  if (!c.up) {
    std::fprintf(stderr, "job_admit_bench: loom up failed (see %s/logs)\n", c.home.path().c_str());
    return 1;
  }
  const std::string admin = c.admin();
  const std::string op = c.token(auth::role::operator_, {"*"});

  auto sched = c.client("scheduler", 2, std::chrono::milliseconds(10000));
  if (!sched) {
    std::fprintf(stderr, "job_admit_bench: no scheduler client\n");
    return 1;
  }

  v1::SubmitJobRequest submit;
  submit.set_template_name("pipeline-test");
  submit.set_template_toml(read_template("pipeline-test"));
  submit.add_overrides("text=/usr/share/common-licenses/GPL-3");
  submit.add_overrides("steps=10");
  // A gang of 64 trainers where there is one: every job is admitted and
  // queued (waiting for its group), none placed, so no training competes with
  // the control plane for the cores. (A zone without trainers is refused at
  // submit now: nothing would ever run there.)
  submit.add_overrides("trainers=64");
  submit.add_overrides("train.grad_accum=64");
  const std::string body = submit.SerializeAsString();

  // The control plane's CPU per admission: the scheduler's (authorise,
  // validate, store, queue) and the audit service's (each admission's record).
  c.refresh();
  const long sched_pid = c.ep("scheduler").pid, audit_pid = c.ep("audit").pid;
  const double sched_cpu0 = bench::process_cpu_s(sched_pid), audit_cpu0 = bench::process_cpu_s(audit_pid);
  std::atomic<int> next{0}, failed{0};
  std::vector<std::vector<double>> lat(clients);
  std::vector<std::thread> pool;
  const auto t0 = clock_type::now();
  for (int t = 0; t < clients; ++t)
    pool.emplace_back([&, t] {
      auto cli = c.client("scheduler", 2, std::chrono::milliseconds(30000));
      if (!cli) {
        failed += 1;
        return;
      }
      while (next.fetch_add(1) < jobs) {
        const auto a = clock_type::now();
        auto r = cli->call({"", "loom.v1.SubmitJobRequest", body, op});
        lat[t].push_back(std::chrono::duration<double, std::milli>(clock_type::now() - a).count());
        if (!r || r->code != errc::ok) {
          if (failed.fetch_add(1) < 3)
            std::fprintf(stderr, "job_admit_bench: submit failed: %s\n",
                         r ? r->message.c_str() : r.err().to_string().c_str());
        }
      }
    });
  for (auto& th : pool) th.join();
  const double secs = std::chrono::duration<double>(clock_type::now() - t0).count();
  const double sched_cpu = bench::process_cpu_s(sched_pid) - sched_cpu0;
  const double audit_cpu = bench::process_cpu_s(audit_pid) - audit_cpu0;

  // Correctness: every admitted job is listed exactly once, queued.
  v1::ListJobsReply listed;
  auto r = sched->call({"", "loom.v1.ListJobsRequest", v1::ListJobsRequest().SerializeAsString(), admin});
  if (!r || r->code != errc::ok || !listed.ParseFromString(r->body)) {
    std::fprintf(stderr, "job_admit_bench: cannot list jobs\n");
    return 1;
  }
  int queued = 0;
  for (const auto& j : listed.jobs()) queued += j.state() == "queued";
  std::vector<double> all;
  for (auto& v : lat) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) { return all.empty() ? 0.0 : all[std::min(all.size() - 1, std::size_t(p * double(all.size())))]; };
  std::printf("admitted %d jobs with %d clients in %.2f s; listed %d (%d queued); %d failed\n", jobs, clients, secs,
              listed.jobs_size(), queued, failed.load());
  if (failed.load() != 0 || listed.jobs_size() != jobs) return 1;
  std::printf("case=admit jobs=%d clients=%d admissions_per_s=%.0f p50_ms=%.2f p99_ms=%.2f "
              "scheduler_cpu_us_per_job=%.0f audit_cpu_us_per_job=%.0f load=\"%s\"\n",
              jobs, clients, double(jobs) / secs, pct(0.50), pct(0.99), sched_cpu * 1e6 / jobs, audit_cpu * 1e6 / jobs,
              bench::loadavg().c_str());
  return 0;
}
