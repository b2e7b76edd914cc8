#include "libs/engine/model.hpp"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <vector>
#include <new>
#include <string>

#include "libs/model/init.hpp"
#include "libs/engine/kernels.hpp"

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

// Where each activation lives. Per-layer arrays have a leading L dimension.
struct gpt2::acts {
  std::size_t BT, C, C3, C4, att_per_layer;
  float* x0;                        // (B,T,C) embeddings
  float *ln1, *ln1_mean, *ln1_rstd; // (L,B,T,C), (L,B,T) ×2
  float* qkv;                       // (L,B,T,3C)
  float* att;                       // (L,B,NH,T,T)
  float* atty;                      // (L,B,T,C) attention output before projection
  float* x1;                        // (L,B,T,C) residual after attention
  float *ln2, *ln2_mean, *ln2_rstd; // (L,B,T,C), (L,B,T) ×2
  float* fch;                       // (L,B,T,4C) before GELU
  float* fchg;                      // (L,B,T,4C) after GELU
  float* x2;                        // (L,B,T,C) residual after MLP = block output
  float *lnf, *lnf_mean, *lnf_rstd; // (B,T,C), (B,T) ×2
  float* logits;                    // (B,T,Vp); dlogits in place during backward
  float *losses, *lse, *weights, *row_scale;  // (B,T) each
  // scratch_
  float* tmp;    // (B,T,C) projection output before the residual add
  float* dres;   // (B,T,C) gradient of the residual stream
  float* dbtc;   // (B,T,C) dlnf / dln2 / datty / dln1, one at a time
  float* dqkv;   // (B,T,3C)
  float* dfch;   // (B,T,4C) dfchg, then dfch in place
  float* datt;   // (B,NH,T) attention backward rows

  float* layer(float* base, std::size_t per_layer, int l) const { return base + per_layer * l; }
};

namespace {

struct act_sizes {
  std::size_t acts = 0, scratch = 0;
};

// Lays the activations out one after another; with base == nullptr it only counts.
template <class Acts>
act_sizes place(Acts& a, float* acts_base, float* scratch_base, const model::gpt2_config& cfg, int B,
                int T) {
  const std::size_t L = cfg.layers, BT = std::size_t(B) * T, C = cfg.channels;
  a.BT = BT; a.C = C; a.C3 = 3 * C; a.C4 = 4 * C;
  a.att_per_layer = std::size_t(B) * cfg.heads * T * T;
  std::size_t off = 0;
  auto take = [&](float*& p, std::size_t n) { p = acts_base ? acts_base + off : nullptr; off += n; };
  take(a.x0, BT * C);
  take(a.ln1, L * BT * C); take(a.ln1_mean, L * BT); take(a.ln1_rstd, L * BT);
  take(a.qkv, L * BT * 3 * C);
  take(a.att, L * a.att_per_layer);
  take(a.atty, L * BT * C);
  take(a.x1, L * BT * C);
  take(a.ln2, L * BT * C); take(a.ln2_mean, L * BT); take(a.ln2_rstd, L * BT);
  take(a.fch, L * BT * 4 * C);
  take(a.fchg, L * BT * 4 * C);
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
  return s;
}

}  // namespace

gpt2::acts gpt2::views() {
  acts a{};
  place(a, acts_.data(), scratch_.data(), cfg_, B_, T_);
  return a;
}

result<gpt2> gpt2::create(const model::gpt2_config& cfg, int batch, int seq_len) {
  if (auto st = cfg.validate(); !st) return st.err();
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
  const act_sizes s = place(probe, nullptr, nullptr, cfg, batch, seq_len);
  try {
    m.params_ = float_buffer(m.layout_.total);
    m.grads_ = float_buffer(m.layout_.total);
    m.acts_ = float_buffer(s.acts);
    m.scratch_ = float_buffer(s.scratch);
    m.inputs_ = std::make_unique<std::int32_t[]>(std::size_t(batch) * seq_len);
    m.targets_ = std::make_unique<std::int32_t[]>(std::size_t(batch) * seq_len);
  } catch (const std::bad_alloc&) {
    return make_error(errc::resource_exhausted,
                      "gpt2: cannot allocate " +
                          std::to_string((2 * m.layout_.total + s.acts + s.scratch) * 4 >> 20) +
                          " MiB for parameters, gradients and activations");
  }
  m.logits_ = m.views().logits;  // heap storage: stays valid when m moves
  m.hidden_ = m.views().lnf;
  m.losses_ = m.views().losses;
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
  mm_forward(a.logits, a.lnf, param_views().wte, nullptr, N, cfg_.channels, cfg_.padded_vocab);
  have_targets_ = !targets.empty();
  if (!have_targets_) return 0.0f;
  k::crossentropy_forward(a.losses, a.lse, a.logits, targets_.get(), N, V, cfg_.padded_vocab);
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

struct gpt2::bf16_state {
  bf16_gemm gemm;
  std::vector<std::uint16_t> params, a, b;  // the parameters' bf16 copy; two activations' scratch
};
void gpt2::bf16_deleter::operator()(bf16_state* s) const { delete s; }

status gpt2::set_precision(precision p) {
  if (p == precision::automatic)
    return make_error(errc::invalid_argument, "gpt2::set_precision: resolve auto first (choose_precision)");
  if (p == precision::fp32) {
    bf16_.reset();
    return ok_status();
  }
  if (bf16_) return ok_status();
  auto probe = bf16_matmul::make(1, 1, 1);  // oneDNN has a bf16 matmul here at all
  if (!probe) return probe.err();
  std::unique_ptr<bf16_state, bf16_deleter> st(new bf16_state);
  const std::size_t N = std::size_t(B_) * T_, C = cfg_.channels;
  st->params.resize(params_.size());
  st->a.resize(N * std::max<std::size_t>(4 * C, cfg_.padded_vocab));  // inp or dout of any matmul
  st->b.resize(N * 4 * C);                                            // inp of a weight gradient
  bf16_ = std::move(st);
  return ok_status();
}

precision_choice gpt2::use_precision(precision asked) {
  auto chosen = choose_precision(asked, probe_bf16());
  if (auto st = set_precision(chosen.used); !st) {
    chosen = {precision::fp32, std::string(to_string(asked)) + " trains in fp32: " + st.err().message};
    (void)set_precision(precision::fp32);
  }
  return chosen;
}

void gpt2::mm_forward(float* out, const float* inp, const float* weight, const float* bias, int N, int C, int OC) {
  if (!bf16_) return k::matmul_forward(out, inp, weight, bias, N, C, OC);
  // out (N×OC) = inp (N×C) · Wᵀ, W stored OC×C: op(B) = Wᵀ, a layout, not a copy.
  to_bf16_parallel(inp, bf16_->a.data(), std::size_t(N) * C);
  const std::uint16_t* w = bf16_->params.data() + (weight - params_.data());
  if (auto st = bf16_->gemm.run(false, true, N, OC, C, bf16_->a.data(), w, out, false); !st) {
    std::fprintf(stderr, "gpt2: %s\n", st.err().message.c_str());
    std::abort();  // set_precision made a bf16 matmul here: a shape it cannot do is a broken invariant
  }
  if (!bias) return;
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; ++i) {
    float* o = out + std::size_t(i) * OC;
    for (int j = 0; j < OC; ++j) o[j] += bias[j];
  }
}

void gpt2::mm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                       const float* weight, int N, int C, int OC, bool accumulate) {
  if (!bf16_) return k::matmul_backward(dinp, dweight, dbias, dout, inp, weight, N, C, OC, accumulate);
  to_bf16_parallel(dout, bf16_->a.data(), std::size_t(N) * OC);
  to_bf16_parallel(inp, bf16_->b.data(), std::size_t(N) * C);
  const std::uint16_t* w = bf16_->params.data() + (weight - params_.data());
  // dinp (N×C) = dout (N×OC) · W (OC×C); dW (OC×C) (+)= doutᵀ · inp, doutᵀ a layout.
  auto ok = bf16_->gemm.run(false, false, N, C, OC, bf16_->a.data(), w, dinp, false);
  if (ok) ok = bf16_->gemm.run(true, false, OC, C, N, bf16_->a.data(), bf16_->b.data(), dweight, accumulate);
  if (!ok) {
    std::fprintf(stderr, "gpt2: %s\n", ok.err().message.c_str());
    std::abort();
  }
  if (dbias) k::bias_backward(dbias, dout, N, OC, accumulate);
}

status gpt2::forward_backbone() {
  acts a = views();
  // bf16: this step's copy of the parameters (the optimizer changed them since).
  if (bf16_) to_bf16_parallel(params_.data(), bf16_->params.data(), params_.size());
  const model::tensor_views p = param_views();
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.heads, L = cfg_.layers;
  const int N = B * T;
  const std::size_t C_ = C;
  k::encoder_forward(a.x0, inputs_.get(), p.wte, p.wpe, B, T, C);
  auto stopped = [] { return make_error(errc::unavailable, "gpt2::forward: interrupted (stop requested)"); };
  for (int l = 0; l < L; ++l) {
    if (interrupted()) return stopped();
    const float* x = l == 0 ? a.x0 : a.layer(a.x2, a.BT * C_, l - 1);
    float* ln1 = a.layer(a.ln1, a.BT * C_, l);
    float* ln1m = a.layer(a.ln1_mean, a.BT, l);
    float* ln1r = a.layer(a.ln1_rstd, a.BT, l);
    float* qkv = a.layer(a.qkv, a.BT * a.C3, l);
    float* att = a.layer(a.att, a.att_per_layer, l);
    float* atty = a.layer(a.atty, a.BT * C_, l);
    float* x1 = a.layer(a.x1, a.BT * C_, l);
    float* ln2 = a.layer(a.ln2, a.BT * C_, l);
    float* ln2m = a.layer(a.ln2_mean, a.BT, l);
    float* ln2r = a.layer(a.ln2_rstd, a.BT, l);
    float* fch = a.layer(a.fch, a.BT * a.C4, l);
    float* fchg = a.layer(a.fchg, a.BT * a.C4, l);
    float* x2 = a.layer(a.x2, a.BT * C_, l);
    k::layernorm_forward(ln1, ln1m, ln1r, x, p.ln1w + l * C_, p.ln1b + l * C_, N, C);
    mm_forward(qkv, ln1, p.qkvw + l * 3 * C_ * C_, p.qkvb + l * 3 * C_, N, C, 3 * C);
    k::attention_forward(atty, att, qkv, B, T, C, NH);
    mm_forward(a.tmp, atty, p.attprojw + l * C_ * C_, p.attprojb + l * C_, N, C, C);
    k::residual_forward(x1, x, a.tmp, a.BT * C_);
    k::layernorm_forward(ln2, ln2m, ln2r, x1, p.ln2w + l * C_, p.ln2b + l * C_, N, C);
    mm_forward(fch, ln2, p.fcw + l * 4 * C_ * C_, p.fcb + l * 4 * C_, N, C, 4 * C);
    k::gelu_forward(fchg, fch, a.BT * a.C4);
    mm_forward(a.tmp, fchg, p.fcprojw + l * 4 * C_ * C_, p.fcprojb + l * C_, N, 4 * C, C);
    k::residual_forward(x2, x1, a.tmp, a.BT * C_);
  }
  if (interrupted()) return stopped();
  const float* xl = a.layer(a.x2, a.BT * C_, L - 1);
  k::layernorm_forward(a.lnf, a.lnf_mean, a.lnf_rstd, xl, p.lnfw, p.lnfb, N, C);
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

bool gpt2::backward_from_rows(bool accumulate) {
  acts a = views();
  const model::tensor_views p = param_views();
  const model::tensor_views g = grad_views();
  const int N = B_ * T_, C = cfg_.channels, Vp = cfg_.padded_vocab;
  k::crossentropy_backward(a.logits, a.logits, a.lse, targets_.get(), a.row_scale, N,
                           cfg_.vocab, Vp);
  have_targets_ = false;  // logits are now dlogits
  // Parameter gradients are written (acc = false) or added by their first
  // writer below; dwte's second writer, the encoder, always adds. wpe's rows
  // >= T are never written and stay 0 from allocation (or zero_grad()).
  mm_backward(a.dbtc, g.wte, nullptr, a.logits, a.lnf, p.wte, N, C, Vp, accumulate);
  return backward_backbone(accumulate);
}

bool gpt2::backward_backbone(bool accumulate) {
  acts a = views();
  const model::tensor_views p = param_views();
  const model::tensor_views g = grad_views();
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.heads, L = cfg_.layers;
  const int N = B * T;
  const std::size_t C_ = C;
  const bool acc = accumulate;
  std::memset(a.dres, 0, sizeof(float) * a.BT * C_);
  const float* xl = a.layer(a.x2, a.BT * C_, L - 1);
  k::layernorm_backward(a.dres, g.lnfw, g.lnfb, a.dbtc, xl, p.lnfw, a.lnf_mean, a.lnf_rstd, N, C,
                        acc);
  // dres carries d(block output); the residual adds pass it through unchanged.
  for (int l = L - 1; l >= 0; --l) {
    if (interrupted()) return false;
    const float* x = l == 0 ? a.x0 : a.layer(a.x2, a.BT * C_, l - 1);
    const std::size_t lc = l * C_;
    mm_backward(a.dfch, g.fcprojw + l * 4 * C_ * C_, g.fcprojb + lc, a.dres,
                       a.layer(a.fchg, a.BT * a.C4, l), p.fcprojw + l * 4 * C_ * C_, N, 4 * C, C, acc);
    k::gelu_backward(a.dfch, a.layer(a.fch, a.BT * a.C4, l), a.dfch, a.BT * a.C4);
    mm_backward(a.dbtc, g.fcw + l * 4 * C_ * C_, g.fcb + 4 * lc, a.dfch,
                       a.layer(a.ln2, a.BT * C_, l), p.fcw + l * 4 * C_ * C_, N, C, 4 * C, acc);
    k::layernorm_backward(a.dres, g.ln2w + lc, g.ln2b + lc, a.dbtc, a.layer(a.x1, a.BT * C_, l),
                          p.ln2w + lc, a.layer(a.ln2_mean, a.BT, l), a.layer(a.ln2_rstd, a.BT, l),
                          N, C, acc);
    mm_backward(a.dbtc, g.attprojw + l * C_ * C_, g.attprojb + lc, a.dres,
                       a.layer(a.atty, a.BT * C_, l), p.attprojw + l * C_ * C_, N, C, C, acc);
    k::attention_backward(a.dqkv, a.datt, a.dbtc, a.layer(a.qkv, a.BT * a.C3, l),
                          a.layer(a.att, a.att_per_layer, l), B, T, C, NH);
    mm_backward(a.dbtc, g.qkvw + l * 3 * C_ * C_, g.qkvb + 3 * lc, a.dqkv,
                       a.layer(a.ln1, a.BT * C_, l), p.qkvw + l * 3 * C_ * C_, N, C, 3 * C, acc);
    k::layernorm_backward(a.dres, g.ln1w + lc, g.ln1b + lc, a.dbtc, x, p.ln1w + lc,
                          a.layer(a.ln1_mean, a.BT, l), a.layer(a.ln1_rstd, a.BT, l), N, C, acc);
  }
  k::encoder_backward(g.wte, g.wpe, a.dres, inputs_.get(), B, T, C, acc);
  return true;
}

}  // namespace loom::engine
