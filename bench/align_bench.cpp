// align_bench: alignment steps of the CPU engine against an SFT step on the
// same model — train_bench's tiny GPT-2 (L4 H4 C256, V 50257→50304), B=4 rows
// of T=64, 2 threads (LOOM_BENCH_THREADS overrides), OMP_WAIT_POLICY=passive
// (set by re-executing, as train_bench does).
//   sft  train_step: forward, backward, norm, AdamW over 4×64 tokens
//   dpo  dpo_driver::step on 2 pairs (4 rows): reference forward, policy
//        forward, backward from per-token gradients, AdamW
//   dpo_cached_ref  the same with the reference's log-probs computed once
//        (dpo_driver::reference_logprobs): what a stage revisiting batches pays
//   rm   reward_driver::step on 2 pairs: backbone forward (no LM head), BT,
//        backward from the hidden states, AdamW on backbone and head
//   rl   grpo_driver::step: 1 prompt × 4 samples of 16 new tokens (one
//        batched forward per token), rule reward, reference + policy
//        forward, backward, AdamW
// sft, dpo, rm and dpo_cached_ref steps run interleaved (one of each in turn) so that their
// ratio holds on a shared machine; the median of the timed steps after
// warm-up; the load average is printed with the figures. Last lines, for scripts:
//   case=sft tokens_per_s=<..> ms_per_step=<..>
//   case=dpo tokens_per_s=<..> ms_per_step=<..> vs_sft=<dpo/sft tokens per s>
//   case=dpo_cached_ref tokens_per_s=<..> ms_per_step=<..> vs_sft=<..>
//   case=rm tokens_per_s=<..> ms_per_step=<..> vs_sft=<..>
//   case=rl samples_per_s=<..> ms_per_step=<..>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "bench/bench_util.hpp"
#include "services/trainer/align/dpo.hpp"
#include "services/trainer/align/grpo.hpp"
#include "services/trainer/align/reward_model.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/engine/train_step.hpp"

using namespace loom;
using namespace loom::align;
using clk = std::chrono::steady_clock;

namespace {

constexpr int B = 4, T = 64, P = B / 2;
const model::gpt2_config tiny{4, 4, 256, 1024, 50257, 50304};
const engine::lr_schedule sched{3e-4f, 3e-5f, 2, 1000};

[[noreturn]] void die(const error& e) {
  std::fprintf(stderr, "align_bench: %s\n", e.to_string().c_str());
  std::exit(1);
}

engine::gpt2 make(std::uint64_t seed) {
  auto m = engine::gpt2::create(tiny, B, T);
  if (!m) die(m.err());
  m->init_random(seed);
  return std::move(*m);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Runs the step functions interleaved (step s of each, in turn), so that all
// of them see the same load on a shared machine; the median ms of each over
// `steps` rounds after `warmup`.
std::vector<double> time_interleaved(int warmup, int steps, const std::vector<std::function<void(int)>>& fs) {
  std::vector<std::vector<double>> ms(fs.size());
  for (int s = 0; s < warmup + steps; ++s)
    for (std::size_t i = 0; i < fs.size(); ++i) {
      const auto t0 = clk::now();
      fs[i](s);
      if (s >= warmup) ms[i].push_back(std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
  std::vector<double> out;
  for (auto& v : ms) out.push_back(median(v));
  return out;
}

// P pairs of random tokens: 16-token prompts, 48-token responses (4 × 64 tokens).
pair_batch random_batch(std::mt19937& rng) {
  std::vector<pair_tokens> pairs(static_cast<std::size_t>(P));
  auto toks = [&](int n) {
    std::vector<std::int32_t> v(static_cast<std::size_t>(n));
    for (auto& x : v) x = std::int32_t(rng() % unsigned(tiny.vocab));
    return v;
  };
  for (auto& p : pairs) p = {toks(16), toks(48), toks(48)};
  auto b = make_pair_batch(pairs, T);
  if (!b) die(b.err());
  return *b;
}

}  // namespace

int main(int, char** argv) {
  if (!std::getenv("OMP_WAIT_POLICY")) {
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);
    std::perror("align_bench: re-exec with OMP_WAIT_POLICY=passive failed; continuing");
  }
  const char* env_threads = std::getenv("LOOM_BENCH_THREADS");
  const int threads = env_threads ? std::max(1, std::atoi(env_threads)) : 2;
  engine::kernels::set_threads(threads);
  std::printf("align_bench: tiny L4 H4 C256 V50257, B=%d T=%d threads=%d, load average %s\n", B, T, threads,
              bench::loadavg().c_str());
  std::mt19937 rng(7);
  const pair_batch batch = random_batch(rng);
  engine::gpt2 pi = make(1), ref = make(2);

  // One optimiser for all cases: the figures are step costs, not a training run.
  engine::adamw opt(pi.layout().total, {}, pi.layout().ranges());
  const engine::micro_batch mb{batch.inputs, batch.targets, batch.mask};
  dpo_driver dpo(pi, ref, {0.1f, preference_loss::dpo});
  reward_head head(tiny.channels);
  head.init(3);
  engine::adamw hopt(head.params().size(), {}, head.ranges());
  reward_driver rm(pi, head);
  auto cached = dpo.reference_logprobs(batch);
  if (!cached) die(cached.err());
  const std::vector<double> ms = time_interleaved(2, 12, {
      [&](int s) { if (auto r = engine::train_step(pi, opt, sched, 1.0f, s, std::span(&mb, 1)); !r) die(r.err()); },
      [&](int s) { if (auto r = dpo.step(opt, sched, 1.0f, s, std::span(&batch, 1)); !r) die(r.err()); },
      [&](int s) { if (auto r = rm.step(opt, hopt, sched, 1.0f, s, std::span(&batch, 1)); !r) die(r.err()); },
      [&](int s) {
        if (auto r = dpo.step(opt, sched, 1.0f, s, std::span(&batch, 1), std::span(&*cached, 1)); !r) die(r.err());
      },
  });
  const double sft_ms = ms[0], dpo_ms = ms[1], rm_ms = ms[2], cached_ms = ms[3];

  grpo_options go;
  go.group = B;
  go.max_new_tokens = 16;
  go.stop_token = -1;  // never: every sample is 16 tokens long
  auto even_share = [](const rollout_batch& b) -> result<std::vector<float>> {
    std::vector<float> r;
    for (const auto& resp : b.response) {
      float even = 0;
      for (auto id : resp) even += id % 2 == 0 ? 1.0f : 0.0f;
      r.push_back(even / float(std::max<std::size_t>(1, resp.size())));
    }
    return r;
  };
  grpo_driver rl(pi, ref, even_share, go);
  const std::vector<std::vector<std::int32_t>> prompt{std::vector<std::int32_t>(batch.inputs.begin(), batch.inputs.begin() + 16)};
  const double rl_ms = time_interleaved(1, 5, {[&](int s) {
    if (auto r = rl.step(opt, sched, 1.0f, s, prompt, 100 + std::uint64_t(s)); !r) die(r.err());
  }})[0];

  const double sft_tps = B * T / (sft_ms / 1000.0), dpo_tps = B * T / (dpo_ms / 1000.0), rm_tps = B * T / (rm_ms / 1000.0);
  std::printf("load average after: %s\n", bench::loadavg().c_str());
  std::printf("case=sft tokens_per_s=%.1f ms_per_step=%.1f\n", sft_tps, sft_ms);
  std::printf("case=dpo tokens_per_s=%.1f ms_per_step=%.1f vs_sft=%.3f\n", dpo_tps, dpo_ms, dpo_tps / sft_tps);
  const double cached_tps = B * T / (cached_ms / 1000.0);
  std::printf("case=dpo_cached_ref tokens_per_s=%.1f ms_per_step=%.1f vs_sft=%.3f\n", cached_tps, cached_ms,
              cached_tps / sft_tps);
  std::printf("case=rm tokens_per_s=%.1f ms_per_step=%.1f vs_sft=%.3f\n", rm_tps, rm_ms, rm_tps / sft_tps);
  std::printf("case=rl samples_per_s=%.2f ms_per_step=%.1f\n", B / (rl_ms / 1000.0), rl_ms);
  return 0;
}
