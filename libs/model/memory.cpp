#include "libs/model/memory.hpp"

#include <algorithm>
#include <cstdio>

namespace loom::model {

activation_floats activations(const gpt2_config& cfg, std::uint64_t B, std::uint64_t T) {
  // The engine's layout (libs/engine/model.cpp, place()):
  //   x0 (BT,C); per layer: ln1 (BT,C) + mean/rstd (BT)x2, qkv (BT,3C), att (B,NH,T,T),
  //   atty, x1, ln2 (BT,C) + mean/rstd, fch, fchg (BT,4C), x2 (BT,C);
  //   lnf (BT,C) + mean/rstd, logits (BT,Vp), losses/lse/weights/row_scale (BT).
  //   scratch: tmp, dres, dbtc (BT,C), dqkv (BT,3C), dfch (BT,4C), datt (B,NH,T).
  const std::uint64_t L = cfg.layers, C = cfg.channels, NH = cfg.heads, BT = B * T;
  activation_floats a;
  const std::uint64_t per_layer = BT * C * 5 + BT * 4 + BT * 3 * C + B * NH * T * T + BT * 4 * C * 2;
  a.acts = BT * C + L * per_layer + BT * C + 2 * BT + BT * std::uint64_t(cfg.padded_vocab) + 4 * BT;
  a.scratch = 3 * BT * C + BT * 3 * C + BT * 4 * C + B * NH * T;
  return a;
}

bf16_values bf16_layout(const gpt2_config& cfg, std::uint64_t B, std::uint64_t T) {
  // libs/engine/model.cpp: place(..., bf16) and set_precision's buffers.
  const std::uint64_t L = cfg.layers, C = cfg.channels, BT = B * T, Vp = std::uint64_t(cfg.padded_vocab);
  const std::uint64_t lm_cols = std::min<std::uint64_t>(Vp, std::max<std::uint64_t>(4 * C, 2048));
  bf16_values v;
  const std::uint64_t scores = B * std::uint64_t(cfg.heads) * T * T;
  v.fp32_dropped = L * BT * C * 3 + L * BT * 4 * C + L * scores;  // ln1, atty, ln2; fchg; att
  v.params = make_param_layout(cfg).total;
  v.acts = 3 * L * BT * C + L * scores;  // ln1, atty, ln2; attention's probabilities
  v.scratch = BT * std::max<std::uint64_t>(4 * C, lm_cols) + BT * 4 * C;
  // libs/engine/attention_bf16.cpp: q, k, v, dO (BT·C each) and dS (B·NH·T·T)
  // in bf16; the scores or dP (B·NH·T·T) and the products (3·BT·C) in fp32.
  v.attention16 = 4 * BT * C + scores;
  v.attention32 = scores + 3 * BT * C;
  return v;
}

training_memory estimate_training(const gpt2_config& cfg, std::uint64_t batch, std::uint64_t seq_len,
                                  std::uint64_t micro_batches, bool sft, bool may_bf16) {
  const std::uint64_t P = make_param_layout(cfg).total, BT = batch * seq_len;
  const activation_floats a = activations(cfg, batch, seq_len);
  training_memory m;
  m.params = 4 * P;
  m.grads = 4 * P;
  m.optimizer = 8 * P;
  m.activations = 4 * (a.acts + a.scratch) + 8 * BT;  // + the model's int32 inputs and targets
  // The loop's unpacked ids (2 x uint32) and, per micro-batch held, int32
  // inputs and targets plus fp32 weights for SFT.
  m.batches = 8 * BT + micro_batches * BT * (sft ? 12 : 8);
  m.overhead = process_overhead_bytes;
  if (may_bf16) {
    const bf16_values v = bf16_layout(cfg, batch, seq_len);
    const std::uint64_t bf16_bytes = v.bytes();
    if (bf16_bytes > 4 * v.fp32_dropped) {  // bf16 holds more: plan for it
      m.activations -= 4 * v.fp32_dropped;
      m.bf16 = bf16_bytes;
    }
  }
  return m;
}

std::string format_bytes(std::uint64_t b) {
  char buf[48];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else std::snprintf(buf, sizeof buf, "%.0f MiB", double(b) / double(1ull << 20));
  return buf;
}

std::string training_memory::describe() const {
  auto gib = [](std::uint64_t b) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", double(b) / double(1ull << 30));
    return std::string(buf);
  };
  return format_bytes(total()) + " (GiB: parameters " + gib(params) + ", gradients " + gib(grads) + ", AdamW " +
         gib(optimizer) + ", activations " + gib(activations) + (bf16 ? ", bf16 copies " + gib(bf16) : "") +
         ", batches " + gib(batches) + ", process " + gib(overhead) + ")";
}

}  // namespace loom::model
