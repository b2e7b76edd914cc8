// outer_step_bench: the aggregator's per-round arithmetic (libs/diloco) on one
// fragment of GPT-2 124M in 4 fragments (~31M values): summing a site's delta
// into the round's accumulator (fp64 and fp32), the NaN/Inf scan every delta
// gets, and the outer Nesterov step itself. Single thread; GB = 10^9 bytes of
// fp32 delta read; per core, best of 3 by this thread's CPU time. Then how
// much the arrival order matters: 4 sites' deltas (N(0, 1e-3), fixed seed)
// summed in all 24 orders, counting the values whose final parameters differ
// from the first order's, for each precision.
//   case=accumulate precision=fp64 values=<n> gb_per_s=<..>
//   case=finite_scan values=<n> gb_per_s=<..>
//   case=outer_step precision=fp64 values=<n> ms=<..>
//   case=order precision=fp64 sites=4 orders=24 values=<n> differing_values=<..>
// Usage: outer_step_bench
#include "bench/bench_util.hpp"
#include "libs/diloco/outer_optimizer.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

using namespace loom;
using loom::bench::thread_cpu_s;

namespace {

constexpr int passes = 3;

template <class F>
double best_s(F&& f) {
  double best = 1e30;
  for (int p = 0; p < passes; ++p) {
    const double t0 = thread_cpu_s();
    f();
    best = std::min(best, thread_cpu_s() - t0);
  }
  return best;
}

std::vector<float> noise(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

const char* name(diloco::accumulate_in p) { return p == diloco::accumulate_in::fp64 ? "fp64" : "fp32"; }

void speed(diloco::accumulate_in precision) {
  auto plan = diloco::fragment_plan::for_gpt2(model::gpt2_config{}, 4, 100).value();
  const std::size_t n = plan.size(0);
  diloco::outer_options o;
  o.precision = precision;
  auto opt = diloco::outer_optimizer::make(plan, std::vector<float>(plan.total(), 0.01f), o).value();
  const auto delta = noise(n, 1);
  std::vector<float> update(n);
  (void)opt.accumulate(0, 1.0, delta);  // first touch of the accumulator, untimed
  const double acc = best_s([&] { (void)opt.accumulate(0, 1000.0, delta); });
  double step_only = 1e30;
  for (int p = 0; p < passes; ++p) {
    (void)opt.accumulate(0, 1000.0, delta);
    const double t0 = thread_cpu_s();
    (void)opt.step(0, update);
    step_only = std::min(step_only, thread_cpu_s() - t0);
  }
  std::printf("case=accumulate precision=%s values=%zu gb_per_s=%.2f\n", name(precision), n,
              static_cast<double>(n) * 4 / acc / 1e9);
  std::printf("case=outer_step precision=%s values=%zu ms=%.1f\n", name(precision), n, step_only * 1e3);
  if (precision == diloco::accumulate_in::fp64) {
    const double scan = best_s([&] {
      if (diloco::first_non_finite(delta)) std::printf("unexpected non-finite\n");
    });
    std::printf("case=finite_scan values=%zu gb_per_s=%.2f\n", n, static_cast<double>(n) * 4 / scan / 1e9);
  }
}

void order(diloco::accumulate_in precision) {
  constexpr std::size_t n = 4u << 20;
  constexpr int sites = 4;
  auto plan = diloco::fragment_plan::flat(n, 1, 1).value();
  std::vector<std::vector<float>> deltas;
  for (int s = 0; s < sites; ++s) deltas.push_back(noise(n, 10 + s));
  const double weights[sites] = {1000, 3000, 1500, 2500};
  diloco::outer_options o;
  o.precision = precision;
  std::vector<int> perm{0, 1, 2, 3};
  std::vector<float> first;
  std::vector<char> differs(n, 0);
  int orders = 0;
  do {
    auto opt = diloco::outer_optimizer::make(plan, std::vector<float>(n, 0.01f), o).value();
    for (int s : perm) (void)opt.accumulate(0, weights[s], deltas[s]);
    (void)opt.step(0);
    const auto p = opt.params(0);  // one fragment: the whole vector
    if (first.empty()) first.assign(p.begin(), p.end());
    for (std::size_t i = 0; i < n; ++i)
      if (std::memcmp(&p[i], &first[i], sizeof(float)) != 0) differs[i] = 1;
    ++orders;
  } while (std::next_permutation(perm.begin(), perm.end()));
  const auto differing = std::count(differs.begin(), differs.end(), 1);
  std::printf("case=order precision=%s sites=%d orders=%d values=%zu differing_values=%ld\n", name(precision), sites,
              orders, n, static_cast<long>(differing));
}

}  // namespace

int main() {
  std::printf("# outer_step_bench  load %s\n", loom::bench::loadavg().c_str());
  speed(diloco::accumulate_in::fp64);
  speed(diloco::accumulate_in::fp32);
  order(diloco::accumulate_in::fp64);
  order(diloco::accumulate_in::fp32);
  return 0;
}
