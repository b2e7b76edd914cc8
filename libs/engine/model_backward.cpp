// gpt2's backward: the LM head and the loss's gradient, then the blocks from
// the last down to the embeddings (model.hpp's backward contracts).
#include "libs/engine/kernels.hpp"
#include "libs/engine/model.hpp"
#include "libs/engine/model_internal.hpp"

#include <cstring>

namespace loom::engine {
namespace k = kernels;

bool gpt2::backward_from_rows(bool accumulate) {
  acts a = views();
  const model::tensor_views p = pviews();
  const model::tensor_views g = grad_views();
  const int N = B_ * T_, C = cfg_.channels, Vp = cfg_.padded_vocab;
  {
    phase_timer t(*this, phase::loss);
    k::crossentropy_backward(a.logits, a.logits, a.lse, targets_.get(), a.row_scale, N, cfg_.vocab, Vp);
  }
  have_targets_ = false;  // logits are now dlogits
  // Parameter gradients are written (acc = false) or added by their first
  // writer below; dwte's second writer, the encoder, always adds. wpe's rows
  // >= T are never written and stay 0 from allocation (or zero_grad()).
  mm_backward(a.dbtc, g.wte, nullptr, a.logits, a.lnf, p.wte, N, C, Vp, accumulate);
  return backward_backbone(accumulate);
}

bool gpt2::backward_backbone(bool accumulate) {
  acts a = views();
  const model::tensor_views p = pviews();
  const model::tensor_views g = grad_views();
  const int B = B_, T = T_, C = cfg_.channels, NH = cfg_.heads, L = cfg_.layers;
  const int N = B * T;
  const std::size_t C_ = C, btc = a.BT * C_;
  const bool acc = accumulate, h = bf16_ != nullptr;
  std::memset(a.dres, 0, sizeof(float) * btc);
  const float* xl = a.layer(a.x2, btc, L - 1);
  {
    phase_timer t(*this, phase::layernorm);
    k::layernorm_backward(a.dres, g.lnfw, g.lnfb, a.dbtc, xl, p.lnfw, a.lnf_mean, a.lnf_rstd, N, C, acc);
  }
  // dres carries d(block output); the residual adds pass it through unchanged.
  for (int l = L - 1; l >= 0; --l) {
    if (interrupted()) return false;
    const float* x = l == 0 ? a.x0 : a.layer(a.x2, btc, l - 1);
    const float* fch = a.layer(a.fch, a.BT * a.C4, l);
    const std::size_t lc = l * C_;
    if (h) {  // GELU's output again, from its fp32 input, rounded as forward rounded it
      {
        phase_timer t(*this, phase::gelu);
        k::gelu_forward(a.dfch, fch, a.BT * a.C4);
      }
      {
        phase_timer t(*this, phase::to_bf16);
        to_bf16_parallel(a.dfch, bf16_->b.data(), a.BT * a.C4);
      }
      mm_backward16(a.dfch, g.fcprojw + l * 4 * C_ * C_, g.fcprojb + lc, a.dres, bf16_->b.data(),
                    p.fcprojw + l * 4 * C_ * C_, N, 4 * C, C, acc);
    } else {
      mm_backward(a.dfch, g.fcprojw + l * 4 * C_ * C_, g.fcprojb + lc, a.dres, a.layer(a.fchg, a.BT * a.C4, l),
                  p.fcprojw + l * 4 * C_ * C_, N, 4 * C, C, acc);
    }
    {
      phase_timer t(*this, phase::gelu);
      k::gelu_backward(a.dfch, fch, a.dfch, a.BT * a.C4);
    }
    mm_backward_kept(a.dbtc, g.fcw + l * 4 * C_ * C_, g.fcb + 4 * lc, a.dfch, a.layer(a.ln2, btc, l),
                     a.layer(a.ln2h, btc, l), p.fcw + l * 4 * C_ * C_, N, C, 4 * C, acc);
    {
      phase_timer t(*this, phase::layernorm);
      k::layernorm_backward(a.dres, g.ln2w + lc, g.ln2b + lc, a.dbtc, a.layer(a.x1, btc, l), p.ln2w + lc,
                            a.layer(a.ln2_mean, a.BT, l), a.layer(a.ln2_rstd, a.BT, l), N, C, acc);
    }
    mm_backward_kept(a.dbtc, g.attprojw + l * C_ * C_, g.attprojb + lc, a.dres, a.layer(a.atty, btc, l),
                     a.layer(a.attyh, btc, l), p.attprojw + l * C_ * C_, N, C, C, acc);
    {
      phase_timer t(*this, phase::attention);
      if (h)
        bf16_->attn->backward(a.dqkv, a.dbtc, a.layer(a.qkv, a.BT * a.C3, l), a.layer(a.atth, a.att_per_layer, l));
      else
        k::attention_backward(a.dqkv, a.datt, a.dbtc, a.layer(a.qkv, a.BT * a.C3, l),
                              a.layer(a.att, a.att_per_layer, l), B, T, C, NH);
    }
    mm_backward_kept(a.dbtc, g.qkvw + l * 3 * C_ * C_, g.qkvb + 3 * lc, a.dqkv, a.layer(a.ln1, btc, l),
                     a.layer(a.ln1h, btc, l), p.qkvw + l * 3 * C_ * C_, N, C, 3 * C, acc);
    {
      phase_timer t(*this, phase::layernorm);
      k::layernorm_backward(a.dres, g.ln1w + lc, g.ln1b + lc, a.dbtc, x, p.ln1w + lc, a.layer(a.ln1_mean, a.BT, l),
                            a.layer(a.ln1_rstd, a.BT, l), N, C, acc);
    }
  }
  {
    phase_timer t(*this, phase::encoder);
    k::encoder_backward(g.wte, g.wpe, a.dres, inputs_.get(), B, T, C, acc);
  }
  return true;
}

}  // namespace loom::engine
