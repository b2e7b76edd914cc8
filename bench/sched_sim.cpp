// sched_sim: a discrete-event simulator that drives the real scheduling policy
// (services/scheduler/policy) over a synthetic trace, for three configurations in
// one run: ours, FIFO (strict head-of-line) and EASY backfill only. Virtual time;
// only the policy calls are timed (steady_clock) as control-plane time.
//
// Trace (fixed seed): 1,000 nodes x 8 GPUs in 4 zones; 100,000 jobs; lognormal
// durations (median 30 min, sigma 1.5: heavy-tailed); power-of-two shapes: single-node
// 1/2/4/8 GPUs, gangs of 2..16 eight-GPU members, elastic 1..2 -> 4..8 members;
// priorities 0/1/2, 8 tenants, estimates off by up to +-50%. Arrivals are Poisson at
// 1.2x the cluster's GPU capacity (saturated). Elastic jobs do a fixed amount of
// member-time: more members finish sooner. A preempted checkpointable job keeps its
// progress and pays a 60 s restart; any other loses all of it.
//
// Metrics, over the arrival window (the saturated part): utilization = allocated
// GPU-time / GPU-time; waste = GPU-time idle while a queued job could have started on
// free capacity (upper bound: min(idle GPUs, GPUs of queued jobs that fit)), over
// GPU-time. mean_jct_s over all jobs (submit to finish).
#include "services/scheduler/policy/policy.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <queue>
#include <random>
#include <string>
#include <vector>

using namespace loom::scheduler::policy;
using steady = std::chrono::steady_clock;

namespace {

constexpr int kNodes = 1000, kGpusPerNode = 8, kZones = 4, kTenants = 8;
int kJobs = 100'000;  // argv[1] may lower it, for profiling
constexpr double kLoad = 1.2;          // offered GPU-time / capacity: saturated
constexpr time_ms kRestart = 60'000;  // checkpoint reload and warm-up after a preemption

resources per_gpu(std::uint32_t g) { return {g, 8 * g, std::uint64_t(g) * (128ull << 30)}; }

struct trace_job {
  job_spec spec;
  time_ms submit = 0;
  double work = 0;  // member-milliseconds
};

std::vector<trace_job> make_trace(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::lognormal_distribution<double> dur(std::log(1800.0), 1.5);
  std::vector<trace_job> t(kJobs);
  double gpu_ms = 0;
  for (int i = 0; i < kJobs; ++i) {
    trace_job& j = t[i];
    job_spec& s = j.spec;
    s.id = job_id(i + 1);
    s.tenant = "tenant" + std::to_string(rng() % kTenants);
    double p = u(rng);
    s.priority = p < 0.70 ? 0 : p < 0.95 ? 1 : 2;
    double shape = u(rng);
    if (shape < 0.55) {
      s.per_member = per_gpu(1u << (rng() % 4));
    } else if (shape < 0.85) {
      double m = u(rng);
      s.per_member = per_gpu(8);
      s.min_members = s.max_members = m < 0.4 ? 2 : m < 0.7 ? 4 : m < 0.9 ? 8 : 16;
    } else {
      s.per_member = per_gpu(8);
      s.min_members = 1u << (rng() % 2);
      s.max_members = 4u << (rng() % 2);
    }
    time_ms d = time_ms(std::clamp(dur(rng), 60.0, 7 * 86400.0) * 1000);
    s.estimated_runtime = time_ms(double(d) * (0.5 + u(rng)));
    s.min_runtime = 600'000;  // 10 min
    s.checkpointable = u(rng) < 0.8;
    j.work = double(d) * s.max_members;
    gpu_ms += j.work * s.per_member.gpus;
  }
  // Poisson arrivals at kLoad x capacity.
  double rate = kLoad * kNodes * kGpusPerNode / (gpu_ms / kJobs);  // jobs per ms
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (auto& j : t) {
    now += gap(rng);
    j.submit = time_ms(now);
  }
  return t;
}

struct result_line {
  std::string name;
  double placements_per_s, p99_ms, utilization, waste, mean_jct_s;
  std::size_t preemptions;
  double wall_s;
};

result_line simulate(const std::string& name, policy_config cfg, const std::vector<trace_job>& trace) {
  auto wall0 = steady::now();
  policy pol(cfg);
  pol.set_tenant_weight("tenant0", 2.0);
  for (int n = 0; n < kNodes; ++n)
    (void)pol.add_node({node_id(n), "zone" + std::to_string(n % kZones), per_gpu(kGpusPerNode)}, 0);
  struct live {
    double remaining = 0;
    std::uint32_t size = 0;
    time_ms since = 0;
    std::uint64_t gen = 0;
  };
  std::vector<live> st(trace.size() + 1);
  for (const auto& j : trace) st[j.spec.id].remaining = j.work;
  using ev = std::tuple<time_ms, int, job_id, std::uint64_t>;  // time, kind (0 finish, 1 arrival), job, gen
  std::priority_queue<ev, std::vector<ev>, std::greater<>> q;
  for (const auto& j : trace) q.emplace(j.submit, 1, j.spec.id, 0);
  // Queued jobs by shape, for the waste metric.
  std::map<std::pair<std::uint32_t, std::uint32_t>, long> queued_shapes;  // (members, gpus) -> count
  auto shape_of = [&](job_id id) {
    const job_spec& s = trace[id - 1].spec;
    return std::make_pair(cfg.elastic ? s.min_members : s.max_members, s.per_member.gpus);
  };
  std::vector<double> lat_ms;
  lat_ms.reserve(3 * trace.size());
  double decide_s = 0, jct_sum = 0;
  std::size_t placements = 0, preemptions = 0, done = 0;
  const time_ms t0 = trace.front().submit, t1 = trace.back().submit;
  double used_int = 0, waste_int = 0;
  time_ms last = t0;
  double waste_gpus = 0;
  const double cap_gpus = double(pol.capacity().gpus);

  auto progress = [&](job_id id, time_ms now) {
    live& l = st[id];
    l.remaining = std::max(0.0, l.remaining - double(now - l.since) * l.size);
    l.since = now;
  };
  auto reschedule = [&](job_id id, time_ms now) {
    live& l = st[id];
    ++l.gen;
    if (l.size > 0) q.emplace(now + time_ms(std::ceil(l.remaining / l.size)), 0, id, l.gen);
  };
  auto apply = [&](const policy::decisions& ds, time_ms now) {
    for (const auto& d : ds) {
      live& l = st[d.job];
      switch (d.what) {
        case action::place:
          ++placements;
          --queued_shapes[shape_of(d.job)];
          l.size = d.size;
          l.since = now;
          reschedule(d.job, now);
          break;
        case action::grow:
        case action::shrink:
          progress(d.job, now);
          l.size = d.size;
          reschedule(d.job, now);
          break;
        case action::preempt:
        case action::requeue:
          ++preemptions;
          progress(d.job, now);
          if (d.checkpoint_first) l.remaining += double(kRestart) * l.size;
          else l.remaining = trace[d.job - 1].work;
          l.size = 0;
          reschedule(d.job, now);
          ++queued_shapes[shape_of(d.job)];
          break;
      }
    }
  };
  auto timed = [&](auto&& call) {
    auto a = steady::now();
    auto r = call();
    double s = std::chrono::duration<double>(steady::now() - a).count();
    decide_s += s;
    lat_ms.push_back(s * 1e3);
    return r;
  };
  while (!q.empty()) {
    auto [now, kind, id, gen] = q.top();
    q.pop();
    if (kind == 0 && gen != st[id].gen) continue;  // superseded finish
    // Integrate over [last, now) within the arrival window.
    time_ms a = std::clamp(last, t0, t1), b = std::clamp(now, t0, t1);
    if (b > a) {
      used_int += (cap_gpus - pol.free().gpus) * double(b - a);
      waste_int += waste_gpus * double(b - a);
    }
    last = now;
    if (kind == 1) {
      ++queued_shapes[shape_of(id)];
      apply(*timed([&] { return pol.submit(trace[id - 1].spec, now); }), now);
    } else {
      st[id].size = 0;
      ++done;
      jct_sum += double(now - trace[id - 1].submit) / 1000.0;
      apply(*timed([&] { return pol.finish(id, now); }), now);
    }
    // Waste after this event: idle GPUs some queued job could start on now.
    waste_gpus = 0;
    double idle = pol.free().gpus;
    if (idle > 0 && pol.queued() > 0) {
      double usable = 0;
      job_spec probe;
      for (const auto& [shape, count] : queued_shapes) {
        if (count <= 0) continue;
        probe.per_member = per_gpu(shape.second);
        probe.min_members = probe.max_members = shape.first;
        if (pol.fits_now(probe)) usable += double(count) * shape.first * shape.second;
        if (usable >= idle) break;
      }
      waste_gpus = std::min(idle, usable);
    }
  }
  std::sort(lat_ms.begin(), lat_ms.end());
  double window = double(t1 - t0) * cap_gpus;
  return {name,
          double(placements) / decide_s,
          lat_ms[std::size_t(0.99 * double(lat_ms.size()))],
          used_int / window,
          waste_int / window,
          jct_sum / double(done),
          preemptions,
          std::chrono::duration<double>(steady::now() - wall0).count()};
}

// Control-plane time to place 125 gangs of 8 one-GPU members (1,000 GPUs) on an
// empty 1,000 x 8 GPU cluster.
double scale_up_s(std::size_t& placed) {
  policy pol;
  for (int n = 0; n < kNodes; ++n)
    (void)pol.add_node({node_id(n), "zone" + std::to_string(n % kZones), per_gpu(kGpusPerNode)}, 0);
  placed = 0;
  auto a = steady::now();
  for (job_id id = 1; id <= 125; ++id) {
    job_spec s;
    s.id = id;
    s.tenant = "scale";
    s.per_member = per_gpu(1);
    s.min_members = s.max_members = 8;
    s.estimated_runtime = 3'600'000;
    auto ds = pol.submit(s, 0);
    for (const auto& d : *ds) placed += d.what == action::place;
  }
  return std::chrono::duration<double>(steady::now() - a).count();
}

}  // namespace

int main(int argc, char** argv) {
  // Usage: sched_sim [jobs [case]]  (defaults: 100000, all cases)
  if (argc > 1) kJobs = std::max(1000, std::atoi(argv[1]));
  std::string only = argc > 2 ? argv[2] : "";
  auto trace = make_trace(20260401);
  std::printf("trace: %d jobs, %d nodes x %d GPUs, %d zones, offered load %.1f, arrivals over %.1f days\n", kJobs,
              kNodes, kGpusPerNode, kZones, kLoad, double(trace.back().submit) / 86'400'000.0);
  policy_config ours;
  policy_config fifo{false, false, false, false, false, false};
  policy_config easy = fifo;
  easy.backfill = easy.reserve = true;
  std::vector<result_line> lines;
  for (auto& [name, cfg] : std::vector<std::pair<std::string, policy_config>>{{"ours", ours}, {"fifo", fifo}, {"easy", easy}}) {
    if (!only.empty() && only != name) continue;
    lines.push_back(simulate(name, cfg, trace));
    std::printf("  %s simulated in %.1f s wall, %zu preemptions/requeues\n", name.c_str(), lines.back().wall_s,
                lines.back().preemptions);
    std::fflush(stdout);
  }
  std::size_t placed = 0;
  double s = scale_up_s(placed);
  std::printf("125 eight-GPU gangs submitted to an empty cluster: %s placed in %.6f s of control-plane time\n",
              placed == 125 ? "all" : std::to_string(placed).c_str(), s);
  std::ifstream la("/proc/loadavg");
  std::string l1;
  la >> l1;
  std::printf("load average (1 min): %s\n", l1.c_str());
  for (const auto& r : lines)
    std::printf("case=%s placements_per_s=%.0f p99_decision_ms=%.3f utilization=%.3f waste=%.3f mean_jct_s=%.0f\n",
                r.name.c_str(), r.placements_per_s, r.p99_ms, r.utilization, r.waste, r.mean_jct_s);
  return 0;
}
