// hpo_bench: issue 15's HPO criterion at full size on the tiny byte-level GPT:
// 8 trials over a log-uniform learning rate, each trained to R in a full
// sweep, then ASHA over the same trials on 4 simulated workers. One line per case:
//   case=sweep trials=8 steps=… best_loss=… best_lr=… cpu_s=…
//   case=asha trials=8 steps=… steps_ratio=… loss_ratio=… best_lr=… makespan_ratio=… cpu_s=…
// Usage: hpo_bench [trials] [R] [seed]   (r = R / 10, eta = 3)
#include "bench/bench_util.hpp"
#include "sim/hpo/local_search.hpp"

#include <cstdio>
#include <cstdlib>

using namespace loom;

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 8;
  const std::int64_t R = argc > 2 ? std::atoll(argv[2]) : 300;
  const std::uint64_t seed = argc > 3 ? std::strtoull(argv[3], nullptr, 10) : 11;
  auto text = sim::licence_corpus();
  if (!text) {
    std::fprintf(stderr, "hpo_bench: %s\n", text.err().message.c_str());
    return 1;
  }
  const sim::search_data data = sim::bytes_split(*text, 0.05);
  sim::search_config cfg;
  cfg.model = model::gpt2_config{2, 4, 64, 32, 256, 256};
  auto space = hpo::search_space::make({hpo::parameter{"optim.lr", hpo::distribution::log_uniform, 1e-4, 3e-2, {}, false}});
  if (!space) return 1;
  const auto trials = space->sample(n, seed);
  const hpo::asha_options opt{R / 10, R, 3, true};

  auto rungs = hpo::asha::make(opt, trials);
  if (!rungs) {
    std::fprintf(stderr, "hpo_bench: %s\n", rungs.err().message.c_str());
    return 1;
  }
  double t0 = bench::thread_cpu_s();
  auto sweep = sim::run_sweep(cfg, data, trials, R, rungs->rungs());  // measured at ASHA's rungs too
  const double sweep_cpu = bench::thread_cpu_s() - t0;
  t0 = bench::thread_cpu_s();
  auto asha = sim::run_asha(cfg, data, trials, opt);
  const double asha_cpu = bench::thread_cpu_s() - t0;
  if (!sweep || !asha) {
    std::fprintf(stderr, "hpo_bench: %s\n", (!sweep ? sweep.err() : asha.err()).message.c_str());
    return 1;
  }
  auto lr = [&](int t) { return t >= 0 ? *trials[std::size_t(t)].number("optim.lr") : 0.0; };
  for (std::size_t i = 0; i < trials.size(); ++i) {  // the sweep's loss, then where ASHA took the trial
    std::printf("# trial %zu %s sweep:", i, trials[i].text().c_str());
    for (const auto& [step, loss] : sweep->trials[i].curve) std::printf(" %lld:%.4f", static_cast<long long>(step), loss);
    std::printf(" asha:");
    for (const auto& [step, loss] : asha->trials[i].curve) std::printf(" %lld:%.4f", static_cast<long long>(step), loss);
    std::printf("\n");
  }
  std::printf("case=sweep trials=%d steps=%lld best_loss=%.4f best_lr=%.3g cpu_s=%.1f load=\"%s\"\n", n,
              static_cast<long long>(sweep->steps), sweep->best_loss, lr(sweep->best), sweep_cpu, bench::loadavg().c_str());
  // A sweep on W workers takes ceil(n / W) · R in virtual time.
  const double sweep_makespan = double((n + cfg.workers - 1) / cfg.workers) * double(R);
  std::printf("case=asha trials=%d workers=%d steps=%lld steps_ratio=%.3f loss_ratio=%.4f best_lr=%.3g best_steps=%lld "
              "makespan_ratio=%.3f cpu_s=%.1f\n",
              n, cfg.workers, static_cast<long long>(asha->steps), double(asha->steps) / double(sweep->steps),
              asha->best_loss / sweep->best_loss, lr(asha->best), static_cast<long long>(asha->best_steps),
              double(asha->sim.makespan) / sweep_makespan, asha_cpu);
  return 0;
}
