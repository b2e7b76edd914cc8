// train_bench: full training steps of the CPU GPT-2 engine — forward,
// backward (overwriting the gradients), global norm, AdamW — at B=4, T=64,
// 2 threads (OpenMP and oneDNN; LOOM_BENCH_THREADS overrides), for tiny (L4 H4 C256) and d12 (GPT-2
// 124M: L12 H12 C768), both with V 50257 padded to 50304 and 1024 positions.
// FLOPs counted as llm.c does: 6·N + 6·L·C·T per token (N = all parameters,
// padded vocab included; the attention term counts the causal half). MFU
// against the peak of the machine it runs on, measured first in the same run:
// the best of the engine's own fp32 matmul (oneDNN sgemm, the same threads) on
// a 2048^3 product — not a constant from another machine (one had AVX-512,
// another only AVX2).
//
// The build machine is shared: a step during which other processes used
// >= 5% of the cores (from /proc/stat) is "contended". Like the llm.c anchor
// in research/llmc.md §5.3, the headline is the median of uncontended steps
// when at least 3 of them exist, else the median of all steps; the detail line
// says which (basis=clean k/n or basis=all) and gives both.
// OpenMP threads wait passively (OMP_WAIT_POLICY=passive, set by re-executing
// this binary unless the caller set a policy): on a shared 2-core machine a
// spinning waiter steals the core its partner needs (measured here under load
// ~5: tiny 350-440 ms/step passive vs 580-830 spinning); on a quiet machine it
// costs a futex wake per parallel region (measured: tiny 104 vs 95 ms, d12 no
// visible difference).
// Usage: train_bench [tiny|d12] [--batch B] [--seq-len T] [--precision fp32|bf16|both]
// (defaults B=4, T=64, both: bf16 beside fp32 where oneDNN has it natively).
// Every case also times its step by phase (gpt2's profile: matmuls, the bf16
// roundings, attention, LayerNorm, GELU, residuals, the loss, the encoder;
// then the gradient norm and AdamW). Last lines, d12 then tiny, for scripts:
//   case=sgemm_peak gflops=<..>
//   case=bf16_peak gflops=<..> native=<0|1> isa=<..> impl=<..>   (issue 28: oneDNN's bf16
//        matmul, bf16 inputs and fp32 output, 2048^3; native=0 where it would be emulated)
//   case=matmul_256x3072x768 fp32_gflops=<..> bf16_gflops=<..>   (d12's MLP shape at B·T = 256)
//   case=<d12|d12_bf16|tiny|tiny_bf16> B=<..> T=<..> tokens_per_s=<..> ms_per_step=<..> mfu=<..>
//        [mfu_bf16=<..>] peak_rss_mb=<..>   (bf16 cases where oneDNN has native bf16;
//        mfu against the fp32 peak, mfu_bf16 against bf16's; peak RSS per case: VmHWM reset)
//   case=phases_<case> B=<..> T=<..> <phase>_ms=<..> ... (medians over the timed steps)
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "libs/engine/bf16.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/optimizer.hpp"

namespace {

using namespace loom::engine;
namespace model = loom::model;
using clk = std::chrono::steady_clock;

double peak_gflops = 0;  // measured by measure_peak() before the cases run
int B = 4, T = 64;       // --batch, --seq-len
constexpr double clean_share = 0.05;  // others' CPU below 5% of all cores: uncontended

struct bench_case {
  const char* name;
  model::gpt2_config cfg;
  int warmup, steps;  // d12 ~1-5 s/step, tiny ~0.1-1 s: both well inside 5 min
  precision prec = precision::fp32;
};

struct figures {
  std::string name;
  double tokens_per_s, ms_per_step, mfu, peak_rss_mb;
  double mfu_bf16 = 0;  // against the bf16 peak (bf16 cases)
  std::string phases;   // " <phase>_ms=<median>" ...
};

double bf16_peak_gflops = 0;  // measured before the cases run; 0 without bf16

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

double self_cpu_s() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + 1e-6 * (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Busy CPU-seconds of the whole machine so far (all processes, all cores).
double machine_busy_s() {
  unsigned long long u = 0, n = 0, s = 0, idle = 0, io = 0, irq = 0, sirq = 0, steal = 0;
  if (FILE* f = std::fopen("/proc/stat", "r")) {
    if (std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &u, &n, &s, &idle, &io,
                    &irq, &sirq, &steal) != 8)
      u = n = s = irq = sirq = steal = 0;
    std::fclose(f);
  }
  return double(u + n + s + irq + sirq + steal) / double(sysconf(_SC_CLK_TCK));
}

// The peak resident set since reset_peak() (VmHWM), so each case's is its own.
double peak_rss_mib() {
  double kib = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmHWM: %lf kB", &kib) == 1) break;
    std::fclose(f);
  }
  return kib / 1024.0;
}
void reset_peak() {
  if (FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

double ms(clk::time_point a, clk::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

figures run(const bench_case& bc) {
  reset_peak();
  auto made = gpt2::create(bc.cfg, B, T, bc.prec);  // made in its precision, as a run makes it
  if (!made) {
    std::fprintf(stderr, "train_bench: %s: %s\n", bc.name, made.err().to_string().c_str());
    std::exit(1);
  }
  gpt2& m = *made;
  m.init_random(1);
  adamw opt(m.layout().total, adamw_config{}, m.layout().ranges());
  const double model_mb = (m.allocated_bytes() + 8.0 * m.layout().total) / (1 << 20);  // + AdamW's m, v
  double rss_after_first = 0;
  std::mt19937 rng(7);
  std::vector<std::int32_t> in(B * T), tgt(B * T);
  std::vector<double> step_ms, clean_ms, fwd_ms, bwd_ms, opt_ms, cpu_ms, norm_ms, adamw_ms;
  constexpr int nph = static_cast<int>(gpt2::phase::count);
  std::vector<double> phase_ms[nph];
  m.set_profiling(true);
  const long cores = sysconf(_SC_NPROCESSORS_ONLN);
  float loss = 0;
  for (int s = 0; s < bc.warmup + bc.steps; ++s) {
    for (int i = 0; i < B * T; ++i) {
      in[i] = static_cast<std::int32_t>(rng() % unsigned(bc.cfg.vocab));
      tgt[i] = static_cast<std::int32_t>(rng() % unsigned(bc.cfg.vocab));
    }
    const double busy0 = machine_busy_s(), self0 = self_cpu_s();
    // The body of train_step(), timed phase by phase.
    m.reset_phases();
    const auto t0 = clk::now();
    loss = *m.forward(in, tgt);
    const auto t1 = clk::now();
    m.backward(1.0f, /*accumulate=*/false);  // overwrites grads: no zero_grad pass
    const auto t2 = clk::now();
    const double norm = global_norm(m.grads());
    const auto tn = clk::now();
    const gpt2::update_target to = m.params_for_update();  // as train_step: bf16's copy in AdamW's pass
    opt.step(to.params, m.grads(), 3e-4f, clip_scale(norm, 1.0f), to.bf16);
    const auto t3 = clk::now();
    const double self = self_cpu_s() - self0, others = machine_busy_s() - busy0 - self;
    if (s == 0) rss_after_first = peak_rss_mib();
    if (s < bc.warmup) continue;
    step_ms.push_back(ms(t0, t3));
    if (others < clean_share * cores * ms(t0, t3) / 1000.0) clean_ms.push_back(ms(t0, t3));
    fwd_ms.push_back(ms(t0, t1));
    bwd_ms.push_back(ms(t1, t2));
    opt_ms.push_back(ms(t2, t3));
    norm_ms.push_back(ms(t2, tn));
    adamw_ms.push_back(ms(tn, t3));
    cpu_ms.push_back(1000.0 * self);
    for (int p = 0; p < nph; ++p) phase_ms[p].push_back(m.phase_ms(static_cast<gpt2::phase>(p)));
  }
  std::string phases;
  char buf[64];
  for (int p = 0; p < nph; ++p) {
    std::snprintf(buf, sizeof buf, " %s_ms=%.1f", std::string(gpt2::phase_name(static_cast<gpt2::phase>(p))).c_str(),
                  median(phase_ms[p]));
    phases += buf;
  }
  std::snprintf(buf, sizeof buf, " grad_norm_ms=%.1f adamw_ms=%.1f", median(norm_ms), median(adamw_ms));
  phases += buf;
  const bool clean = clean_ms.size() >= 3;
  const double step = clean ? median(clean_ms) : median(step_ms);
  const double n = double(m.layout().total);
  const model::gpt2_config& c = bc.cfg;
  const double flop_per_token = 6.0 * n + 6.0 * c.layers * c.channels * T;
  const double tps = B * T / (step / 1000.0);
  std::printf("%s: params %.0f, %d steps after %d warm-up; median ms/step: all %.1f, clean %.1f "
              "(%zu/%d) -> basis=%s; all-step medians: forward %.1f, backward %.1f, "
              "norm+adamw %.1f; min %.1f; process CPU %.1f ms/step; last loss %.3f; %.1f GFLOP/s; "
              "model+optimizer %.0f MiB, peak RSS after the first step %.0f MiB\n",
              bc.name, n, bc.steps, bc.warmup, median(step_ms), median(clean_ms),
              clean_ms.size(), bc.steps, clean ? "clean" : "all", median(fwd_ms),
              median(bwd_ms), median(opt_ms), *std::min_element(step_ms.begin(), step_ms.end()),
              median(cpu_ms), loss, flop_per_token * tps / 1e9, model_mb, rss_after_first);
  std::fflush(stdout);
  const double flops = flop_per_token * tps;
  return {bc.name, tps, step, flops / (peak_gflops * 1e9), peak_rss_mib(),
          bc.prec == precision::bf16 && bf16_peak_gflops > 0 ? flops / (bf16_peak_gflops * 1e9) : 0, phases};
}

// The best GFLOP/s of `run` (a product of `flop` operations, warmed up once:
// oneDNN's JIT) over ~1.5 s and at least 3 runs.
template <class F>
double best_gflops(double flop, F run) {
  run();
  double best = 0;
  const auto until = clk::now() + std::chrono::milliseconds(1500);
  for (int i = 0; i < 3 || clk::now() < until; ++i) {
    const auto t0 = clk::now();
    run();
    best = std::max(best, flop / std::chrono::duration<double>(clk::now() - t0).count() / 1e9);
  }
  return best;
}

// The engine's fp32 matmul, out[M×N] = inp[M×K] · weight[N×K]ᵀ.
double measure_fp32(int M, int N, int K) {
  std::vector<float> a(std::size_t(M) * K, 0.5f), w(std::size_t(N) * K, 0.25f), out(std::size_t(M) * N);
  return best_gflops(2.0 * M * double(N) * K,
                     [&] { kernels::matmul_forward(out.data(), a.data(), w.data(), nullptr, M, K, N); });
}

// The peak: the engine's fp32 matmul on 2048^3, what the kernels this benchmark runs can reach here.
double measure_peak() { return measure_fp32(2048, 2048, 2048); }

// oneDNN's bf16 matmul (bf16 A, B; fp32 C) for M×N×K; 0 where oneDNN has none.
double measure_bf16(std::size_t M, std::size_t N, std::size_t K) {
  auto mm = bf16_matmul::make(M, N, K);
  if (!mm) return 0;
  std::vector<std::uint16_t> a(M * K, to_bf16(0.5f)), b(K * N, to_bf16(0.25f));
  std::vector<float> c(M * N);
  return best_gflops(2.0 * double(M) * double(N) * double(K), [&] { mm->run(a.data(), b.data(), c.data()); });
}

// The CPU's model name and which of the flags that decide bf16's speed it has.
std::string cpu_line() {
  std::string model, flags;
  if (FILE* f = std::fopen("/proc/cpuinfo", "r")) {
    char line[8192];
    while (std::fgets(line, sizeof line, f) && (model.empty() || flags.empty())) {
      const std::string l = line;
      const auto colon = l.find(':');
      if (colon == std::string::npos) continue;
      if (model.empty() && l.rfind("model name", 0) == 0) model = l.substr(colon + 2, l.size() - colon - 3);
      if (flags.empty() && l.rfind("flags", 0) == 0) flags = " " + l.substr(colon + 1);
    }
    std::fclose(f);
  }
  std::string have;
  for (const char* fl : {"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
    if (flags.find(std::string(" ") + fl + " ") != std::string::npos || flags.find(std::string(" ") + fl + "\n") != std::string::npos)
      have += std::string(have.empty() ? "" : ",") + fl;
  return "cpu=\"" + model + "\" flags=" + (have.empty() ? "none" : have);
}

}  // namespace

int main(int argc, char** argv) {
  // libgomp reads its wait policy once, when it loads: set it, then start again.
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::perror("train_bench: re-exec with OMP_WAIT_POLICY=passive failed; continuing");
  }
  std::string only, prec = "both";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    auto positive = [&](const std::string& v) {
      const int n = std::atoi(v.c_str());
      if (n < 1 || std::to_string(n) != v) {
        std::fprintf(stderr, "train_bench: %s wants a positive integer, got '%s'\n", a.c_str(), v.c_str());
        std::exit(2);
      }
      return n;
    };
    if (a == "--batch") B = positive(value());
    else if (a == "--seq-len") T = positive(value());
    else if (a == "--precision") prec = value();
    else if (a == "tiny" || a == "d12") only = a;
    else {
      std::fprintf(stderr, "usage: train_bench [tiny|d12] [--batch B] [--seq-len T] [--precision fp32|bf16|both]\n");
      return 2;
    }
  }
  if (prec != "fp32" && prec != "bf16" && prec != "both") {
    std::fprintf(stderr, "train_bench: --precision is fp32, bf16 or both, got '%s'\n", prec.c_str());
    return 2;
  }
  if (T > 1024) {
    std::fprintf(stderr, "train_bench: --seq-len %d is beyond the models' 1024 positions\n", T);
    return 2;
  }
  const char* env_threads = std::getenv("LOOM_BENCH_THREADS");
  const int threads = env_threads ? std::max(1, std::atoi(env_threads)) : 2;
  kernels::set_threads(threads);  // oneDNN's sgemm runs on the same OpenMP pool
  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  peak_gflops = measure_peak();
  const double bf16_peak = measure_bf16(2048, 2048, 2048);
  bf16_peak_gflops = bf16_peak;
  const double shape_fp32 = measure_fp32(256, 3072, 768), shape_bf16 = measure_bf16(256, 3072, 768);
  std::printf("train_bench: B=%d T=%d threads=%d OMP_WAIT_POLICY=%s peak=%.0f GFLOP/s (measured: sgemm 2048^3) "
              "load average %.2f %.2f %.2f; %s\n",
              B, T, threads, std::getenv("OMP_WAIT_POLICY"), peak_gflops, load[0], load[1], load[2],
              cpu_line().c_str());
  const model::gpt2_config tiny{4, 4, 256, 1024, 50257, 50304};
  const model::gpt2_config d12{12, 12, 768, 1024, 50257, 50304};
  // tiny first, so its peak RSS is its own (ru_maxrss only grows).
  std::vector<figures> out;
  // bf16 beside fp32 where oneDNN multiplies bf16 natively (issue 28).
  const bool native_bf16 = probe_bf16().native;
  if (prec == "bf16" && !native_bf16) std::printf("train_bench: no bf16 case: %s\n", probe_bf16().why.c_str());
  const bool want32 = prec != "bf16", want16 = prec != "fp32" && native_bf16;
  // Steps per case: about the same tokens whatever the shape (B=4, T=64: d12 12, tiny 30).
  const int scale = std::max(1, B * T / 256);
  const int d12_steps = std::max(4, 12 / scale), tiny_steps = std::max(6, 30 / scale);
  if (only != "d12") {
    if (want32) out.push_back(run({"tiny", tiny, 3, tiny_steps}));
    if (want16) out.push_back(run({"tiny_bf16", tiny, 3, tiny_steps, precision::bf16}));
  }
  if (only != "tiny") {
    if (want16) out.insert(out.begin(), run({"d12_bf16", d12, 2, d12_steps, precision::bf16}));
    if (want32) out.insert(out.begin(), run({"d12", d12, 2, d12_steps}));
  }
  std::printf("case=sgemm_peak gflops=%.1f\n", peak_gflops);
  const auto& bf16 = probe_bf16();
  std::printf("case=bf16_peak gflops=%.1f native=%d isa=%s impl=%s\n", bf16_peak, bf16.native ? 1 : 0,
              bf16.isa.c_str(), bf16.impl.empty() ? "none" : bf16.impl.c_str());
  std::printf("case=matmul_256x3072x768 fp32_gflops=%.1f bf16_gflops=%.1f\n", shape_fp32, shape_bf16);
  for (const figures& f : out) {
    std::printf("case=%s B=%d T=%d tokens_per_s=%.1f ms_per_step=%.1f mfu=%.3f", f.name.c_str(), B, T, f.tokens_per_s,
                f.ms_per_step, f.mfu);
    if (f.mfu_bf16 > 0) std::printf(" mfu_bf16=%.3f", f.mfu_bf16);
    std::printf(" peak_rss_mb=%.0f\n", f.peak_rss_mb);
  }
  for (const figures& f : out) std::printf("case=phases_%s B=%d T=%d%s\n", f.name.c_str(), B, T, f.phases.c_str());
  return 0;
}
