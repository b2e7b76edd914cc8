#include "libs/engine/model.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <vector>
#include <new>
#include <string>

#include "libs/model/init.hpp"
#include "libs/engine/kernels.hpp"
#include "libs/engine/model_internal.hpp"

namespace loom::engine {
namespace k = kernels;

void float_buffer::deleter::operator()(float* p) const { std::free(p); }

float_buffer::float_buffer(std::size_t n) : n_(n) {
  const std::size_t bytes = ((n * sizeof(float) + 63) / 64) * 64;
  float* p = static_cast<float*>(std::aligned_alloc(64, bytes == 0 ? 64 : bytes));
  if (!p) throw std::bad_alloc();
  std::memset(p, 0, bytes);
  p_.reset(p);
}

namespace {

struct act_sizes {
  std::size_t acts = 0, scratch = 0, h16 = 0;  // fp32, fp32, bf16 values
};

// Lays the activations out one after another; with null bases it only
// counts. bf16: the activations only a matmul reads go to h16_base, in bf16.
template <class Acts>
act_sizes place(Acts& a, float* acts_base, float* scratch_base, std::uint16_t* h16_base,
                const model::gpt2_config& cfg, int B, int T, bool bf16) {
  const std::size_t L = cfg.layers, BT = std::size_t(B) * T, C = cfg.channels;
  a.BT = BT; a.C = C; a.C3 = 3 * C; a.C4 = 4 * C;
  a.att_per_layer = std::size_t(B) * cfg.heads * T * T;
  std::size_t off = 0;
  auto take = [&](float*& p, std::size_t n) { p = acts_base ? acts_base + off : nullptr; off += n; };
  auto take32 = [&](float*& p, std::size_t n) {  // fp32 only: not held in bf16
    if (bf16) p = nullptr;
    else take(p, n);
  };
  take(a.x0, BT * C);
  take32(a.ln1, L * BT * C); take(a.ln1_mean, L * BT); take(a.ln1_rstd, L * BT);
  take(a.qkv, L * BT * 3 * C);
  take32(a.att, L * a.att_per_layer);
  take32(a.atty, L * BT * C);
  take(a.x1, L * BT * C);
  take32(a.ln2, L * BT * C); take(a.ln2_mean, L * BT); take(a.ln2_rstd, L * BT);
  take(a.fch, L * BT * 4 * C);
  take32(a.fchg, L * BT * 4 * C);
  take(a.x2, L * BT * C);
  take(a.lnf, BT * C); take(a.lnf_mean, BT); take(a.lnf_rstd, BT);
  take(a.logits, BT * std::size_t(cfg.padded_vocab));
  take(a.losses, BT); take(a.lse, BT); take(a.weights, BT); take(a.row_scale, BT);
  act_sizes s;
  s.acts = off;
  off = 0;
  auto stake = [&](float*& p, std::size_t n) { p = scratch_base ? scratch_base + off : nullptr; off += n; };
  stake(a.tmp, BT * C);
  stake(a.dres, BT * C);
  stake(a.dbtc, BT * C);
  stake(a.dqkv, BT * 3 * C);
  stake(a.dfch, BT * 4 * C);
  stake(a.datt, std::size_t(B) * cfg.heads * T);
  s.scratch = off;
  off = 0;
  auto htake = [&](std::uint16_t*& p, std::size_t n) {
    p = bf16 && h16_base ? h16_base + off : nullptr;
    if (bf16) off += n;
  };
  htake(a.ln1h, L * BT * C);
  htake(a.ln2h, L * BT * C);
  htake(a.attyh, L * BT * C);
  htake(a.atth, L * a.att_per_layer);
  s.h16 = off;
  return s;
}

}  // namespace

std::string_view gpt2::phase_name(phase p) {
  switch (p) {
    case phase::encoder: return "encoder";
    case phase::layernorm: return "layernorm";
    case phase::matmul: return "matmul";
    case phase::to_bf16: return "to_bf16";
    case phase::attention: return "attention";
    case phase::gelu: return "gelu";
    case phase::residual: return "residual";
    case phase::loss: return "loss";
    case phase::count: break;
  }
  return "?";
}

void gpt2::bf16_deleter::operator()(bf16_state* s) const { delete s; }

gpt2::acts gpt2::views() {
  acts a{};
  place(a, acts_.data(), scratch_.data(), bf16_ ? bf16_->acts.data() : nullptr, cfg_, B_, T_, bf16_ != nullptr);
  return a;
}

void gpt2::relayout() {
  const acts a = views();
  logits_ = a.logits;  // heap storage: stays valid when the model moves
  hidden_ = a.lnf;
  losses_ = a.losses;
  have_targets_ = false;
  have_backbone_ = false;
}

std::size_t gpt2::allocated_bytes() const {
  std::size_t b = 4 * allocated_floats();
  if (bf16_)
    b += 2 * (bf16_->params.size() + bf16_->a.size() + bf16_->b.size() + bf16_->acts.size()) +
         bf16_->gemm.scratchpad_bytes() + bf16_->attn->bytes();
  return b;
}

result<gpt2> gpt2::create(const model::gpt2_config& cfg, int batch, int seq_len, precision p) {
  if (auto st = cfg.validate(); !st) return st.err();
  if (p == precision::automatic)
    return make_error(errc::invalid_argument, "gpt2::create: resolve auto first (choose_precision)");
  if (batch < 1 || seq_len < 1 || seq_len > cfg.max_seq_len)
    return make_error(errc::invalid_argument,
                      "gpt2: need batch >= 1 and 1 <= seq_len <= max_seq_len (" +
                          std::to_string(cfg.max_seq_len) + "), got batch " +
                          std::to_string(batch) + ", seq_len " + std::to_string(seq_len));
  gpt2 m;
  m.cfg_ = cfg;
  m.layout_ = model::make_param_layout(cfg);
  m.B_ = batch;
  m.T_ = seq_len;
  acts probe{};
  const act_sizes s = place(probe, nullptr, nullptr, nullptr, cfg, batch, seq_len, false);
  try {
    m.params_ = float_buffer(m.layout_.total);
    m.grads_ = float_buffer(m.layout_.total);
    if (p == precision::fp32) m.acts_ = float_buffer(s.acts);  // bf16: set_precision lays them out below
    m.scratch_ = float_buffer(s.scratch);
    m.inputs_ = std::make_unique<std::int32_t[]>(std::size_t(batch) * seq_len);
    m.targets_ = std::make_unique<std::int32_t[]>(std::size_t(batch) * seq_len);
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted,
                      "gpt2: cannot allocate " +
                          std::to_string((2 * m.layout_.total + s.acts + s.scratch) * 4 >> 20) +
                          " MiB for parameters, gradients and activations");
  }
  if (p == precision::bf16)
    if (auto st = m.set_precision(precision::bf16); !st) return st.err();
  m.relayout();
  return m;
}

void gpt2::init_random(std::uint64_t seed) { model::init_params(cfg_, params_.span(), seed); }

std::span<const float> gpt2::logits() const {
  return {logits_, std::size_t(B_) * T_ * std::size_t(cfg_.padded_vocab)};
}

void gpt2::zero_grad() { std::memset(grads_.data(), 0, sizeof(float) * grads_.size()); }

status gpt2::check_inputs(std::span<const std::int32_t> inputs) const {
  const std::size_t BT = std::size_t(B_) * T_;
  if (inputs.size() != BT)
    return make_error(errc::invalid_argument,
                      "gpt2::forward: inputs must hold batch*seq_len = " + std::to_string(BT) + " ids");
  for (std::size_t i = 0; i < BT; ++i)
    if (inputs[i] < 0 || inputs[i] >= cfg_.vocab)
      return make_error(errc::invalid_argument, "gpt2::forward: input id out of [0, vocab) at " + std::to_string(i));
  return ok_status();
}

result<float> gpt2::forward(std::span<const std::int32_t> inputs,
                            std::span<const std::int32_t> targets,
                            std::span<const float> weights) {
  have_targets_ = false;  // until this forward has succeeded with targets
  have_backbone_ = false;
  const std::size_t BT = std::size_t(B_) * T_;
  const int V = cfg_.vocab;
  auto bad = [](std::string m) { return make_error(errc::invalid_argument, "gpt2::forward: " + m); };
  if (auto st = check_inputs(inputs); !st) return st.err();
  if (!targets.empty() && targets.size() != BT) return bad("targets must be empty or hold batch*seq_len ids");
  if (!weights.empty() && (targets.empty() || weights.size() != BT))
    return bad("weights need targets and batch*seq_len values");
  for (std::size_t i = 0; i < targets.size(); ++i)
    if (targets[i] < 0 || targets[i] >= V) return bad("target id out of [0, vocab) at " + std::to_string(i));
  acts a = views();
  double wsum = 0.0;
  if (!targets.empty()) {
    for (std::size_t i = 0; i < BT; ++i) {
      const float w = weights.empty() ? 1.0f : weights[i];
      if (!(w >= 0.0f) || !std::isfinite(w)) return bad("weights must be finite and >= 0");
      a.weights[i] = w;
      wsum += w;
    }
    if (wsum <= 0.0) return bad("the loss weights sum to 0: no token to learn from");
  }
  std::memcpy(inputs_.get(), inputs.data(), sizeof(std::int32_t) * BT);
  if (!targets.empty()) std::memcpy(targets_.get(), targets.data(), sizeof(std::int32_t) * BT);
  if (auto st = forward_backbone(); !st) return st.err();
  const int N = B_ * T_;
  mm_forward(a.logits, a.lnf, pviews().wte, nullptr, N, cfg_.channels, cfg_.padded_vocab);
  have_targets_ = !targets.empty();
  if (!have_targets_) return 0.0f;
  {
    phase_timer t(*this, phase::loss);
    k::crossentropy_forward(a.losses, a.lse, a.logits, targets_.get(), N, V, cfg_.padded_vocab);
  }
  double loss = 0.0;  // serial: a fixed summation order
  for (std::size_t i = 0; i < BT; ++i) loss += double(a.weights[i]) * a.losses[i];
  weight_sum_ = static_cast<float>(wsum);
  return static_cast<float>(loss / wsum);
}

status gpt2::forward_hidden(std::span<const std::int32_t> inputs) {
  have_targets_ = false;
  have_backbone_ = false;
  if (auto st = check_inputs(inputs); !st) return st;
  std::memcpy(inputs_.get(), inputs.data(), sizeof(std::int32_t) * inputs.size());
  return forward_backbone();
}

status gpt2::set_precision(precision p) {
  if (p == precision::automatic)
    return make_error(errc::invalid_argument, "gpt2::set_precision: resolve auto first (choose_precision)");
  if (p == matmul_precision()) return ok_status();
  const bool to_bf16 = p == precision::bf16;
  if (to_bf16) {
    auto probe = bf16_matmul::make(1, 1, 1);  // oneDNN has a bf16 matmul here at all
    if (!probe) return probe.err();
  }
  // The activations' layout for the new precision, allocated before anything changes.
  acts probe{};
  const act_sizes s = place(probe, nullptr, nullptr, nullptr, cfg_, B_, T_, to_bf16);
  std::unique_ptr<bf16_state, bf16_deleter> st;
  float_buffer acts;
  try {
    acts = float_buffer(s.acts);
    if (to_bf16) {
      st.reset(new bf16_state);
      const std::size_t N = std::size_t(B_) * T_, C = cfg_.channels, Vp = cfg_.padded_vocab;
      // The LM head's backward takes the vocabulary in pieces of lm_cols
      // columns so its bf16 dout fits beside the others' (N·4C) instead of
      // needing N·Vp (d12 at B·T = 2048: 206 MB).
      st->lm_cols = std::min<std::size_t>(Vp, std::max<std::size_t>(4 * C, 2048));
      st->params.resize(params_.size());
      st->a.resize(N * std::max<std::size_t>(4 * C, st->lm_cols));
      st->b.resize(N * 4 * C);
      st->acts.resize(s.h16);
      auto at = bf16_attention::make(B_, T_, cfg_.channels, cfg_.heads);
      if (!at) return at.err();
      st->attn.emplace(std::move(*at));
    }
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted, std::string("gpt2::set_precision: cannot allocate the ") +
                                                    std::string(engine::to_string(p)) + " activations");
  }
  acts_ = std::move(acts);
  bf16_ = std::move(st);
  bf16_copy_current_ = false;
  relayout();
  return ok_status();
}

status gpt2::forward_backbone() {
  acts a = views();
  // bf16: this step's copy of the parameters, unless the optimizer wrote it.
  if (bf16_ && !bf16_copy_current_) {
    phase_timer t(*this, phase::to_bf16);
    to_bf16_parallel(params_.data(), bf16_->params.data(), params_.size());
    bf16_copy_current_ = true;
    ++bf16_copies_;
  }
  const bool h = bf16_ != nullptr;
  const model::tensor_views p = pviews();
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.heads, L = cfg_.layers;
  const int N = B * T;
  const std::size_t C_ = C;
  {
    phase_timer t(*this, phase::encoder);
    k::encoder_forward(a.x0, inputs_.get(), p.wte, p.wpe, B, T, C);
  }
  auto stopped = [] { return make_error(errc::unavailable, "gpt2::forward: interrupted (stop requested)"); };
  for (int l = 0; l < L; ++l) {
    if (interrupted()) return stopped();
    const float* x = l == 0 ? a.x0 : a.layer(a.x2, a.BT * C_, l - 1);
    // bf16: LayerNorm and attention write fp32 into tmp, kept in bf16 only.
    float* ln1 = h ? a.tmp : a.layer(a.ln1, a.BT * C_, l);
    float* ln1m = a.layer(a.ln1_mean, a.BT, l);
    float* ln1r = a.layer(a.ln1_rstd, a.BT, l);
    float* qkv = a.layer(a.qkv, a.BT * a.C3, l);
    float* att = h ? nullptr : a.layer(a.att, a.att_per_layer, l);
    float* atty = h ? a.tmp : a.layer(a.atty, a.BT * C_, l);
    float* x1 = a.layer(a.x1, a.BT * C_, l);
    float* ln2 = h ? a.tmp : a.layer(a.ln2, a.BT * C_, l);
    float* ln2m = a.layer(a.ln2_mean, a.BT, l);
    float* ln2r = a.layer(a.ln2_rstd, a.BT, l);
    float* fch = a.layer(a.fch, a.BT * a.C4, l);
    float* fchg = h ? a.dfch : a.layer(a.fchg, a.BT * a.C4, l);  // bf16: GELU's fp32 output is transient
    float* x2 = a.layer(a.x2, a.BT * C_, l);
    const std::size_t btc = a.BT * C_;
    {
      phase_timer t(*this, phase::layernorm);
      k::layernorm_forward(ln1, ln1m, ln1r, x, p.ln1w + l * C_, p.ln1b + l * C_, N, C);
    }
    mm_forward_kept(qkv, ln1, a.layer(a.ln1h, btc, l), p.qkvw + l * 3 * C_ * C_, p.qkvb + l * 3 * C_, N, C, 3 * C);
    {
      phase_timer t(*this, phase::attention);
      if (h) bf16_->attn->forward(atty, a.layer(a.atth, a.att_per_layer, l), qkv);
      else k::attention_forward(atty, att, qkv, B, T, C, NH);
    }
    mm_forward_kept(a.tmp, atty, a.layer(a.attyh, btc, l), p.attprojw + l * C_ * C_, p.attprojb + l * C_, N, C, C);
    {
      phase_timer t(*this, phase::residual);
      k::residual_forward(x1, x, a.tmp, btc);
    }
    {
      phase_timer t(*this, phase::layernorm);
      k::layernorm_forward(ln2, ln2m, ln2r, x1, p.ln2w + l * C_, p.ln2b + l * C_, N, C);
    }
    mm_forward_kept(fch, ln2, a.layer(a.ln2h, btc, l), p.fcw + l * 4 * C_ * C_, p.fcb + l * 4 * C_, N, C, 4 * C);
    {
      phase_timer t(*this, phase::gelu);
      k::gelu_forward(fchg, fch, a.BT * a.C4);
    }
    mm_forward(a.tmp, fchg, p.fcprojw + l * 4 * C_ * C_, p.fcprojb + l * C_, N, 4 * C, C);  // bf16: not kept
    {
      phase_timer t(*this, phase::residual);
      k::residual_forward(x2, x1, a.tmp, btc);
    }
  }
  if (interrupted()) return stopped();
  const float* xl = a.layer(a.x2, a.BT * C_, L - 1);
  {
    phase_timer t(*this, phase::layernorm);
    k::layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, xl, p.lnfw, p.lnfb, N, C);
  }
  have_backbone_ = true;
  return ok_status();
}

bool gpt2::backward(float loss_scale, bool accumulate) {
  if (!have_targets_) std::abort();  // broken invariant: REQUIRES a forward with targets
  acts a = views();
  for (std::size_t i = 0; i < a.BT; ++i) a.row_scale[i] = loss_scale * a.weights[i] / weight_sum_;
  return backward_from_rows(accumulate);
}

void gpt2::token_logprobs(std::span<float> out) const {
  const std::size_t BT = std::size_t(B_) * T_;
  if (out.size() != BT) std::abort();  // broken invariant: REQUIRES out.size() == B*T
  for (std::size_t i = 0; i < BT; ++i) out[i] = -losses_[i];
}

status gpt2::backward_from_token_grads(std::span<const float> dlogp, bool accumulate) {
  if (!have_targets_) std::abort();  // broken invariant: REQUIRES a forward with targets
  acts a = views();
  if (dlogp.size() != a.BT)
    return make_error(errc::invalid_argument, "gpt2::backward_from_token_grads: dlogp must hold batch*seq_len values");
  for (std::size_t i = 0; i < a.BT; ++i) {
    if (!std::isfinite(dlogp[i]))
      return make_error(errc::invalid_argument,
                        "gpt2::backward_from_token_grads: non-finite dlogp at " + std::to_string(i));
    a.row_scale[i] = -dlogp[i];  // loss_i = −log p_i, so dJ/dloss_i = −dJ/dlogp_i
  }
  if (!backward_from_rows(accumulate))
    return make_error(errc::unavailable, "gpt2::backward: interrupted (stop requested)");
  return ok_status();
}

std::span<const float> gpt2::hidden() const {
  return {hidden_, std::size_t(B_) * T_ * std::size_t(cfg_.channels)};
}

status gpt2::backward_from_hidden(std::span<const float> dhidden, bool accumulate) {
  if (!have_backbone_) std::abort();  // broken invariant: REQUIRES a forward
  acts a = views();
  if (dhidden.size() != a.BT * a.C)
    return make_error(errc::invalid_argument, "gpt2::backward_from_hidden: dhidden must hold batch*seq_len*channels values");
  std::memcpy(a.dbtc, dhidden.data(), sizeof(float) * dhidden.size());
  // wte's first writer (the LM head's backward) is skipped: the encoder only adds.
  if (!accumulate) std::memset(grad_views().wte, 0, sizeof(float) * layout_.size(model::tensor_id::wte));
  have_targets_ = false;
  if (!backward_backbone(accumulate))
    return make_error(errc::unavailable, "gpt2::backward: interrupted (stop requested)");
  return ok_status();
}

}  // namespace loom::engine
