#include "services/trainer/align/dpo.hpp"

#include <algorithm>

namespace loom::align {

void sequence_logprobs(const engine::gpt2& m, const pair_batch& b, std::vector<float>& tok, std::span<float> out) {
  const std::size_t T = std::size_t(b.seq_len);
  tok.resize(b.mask.size());
  m.token_logprobs(tok);
  for (std::size_t r = 0; r < out.size(); ++r) {
    double s = 0;  // fixed order
    for (std::size_t t = 0; t < T; ++t) s += double(b.mask[r * T + t]) * tok[r * T + t];
    out[r] = float(s);
  }
}

namespace {

status check_fit(const engine::gpt2& m, const pair_batch& b) {
  if (m.batch() != 2 * b.pairs || m.seq_len() != b.seq_len)
    return make_error(errc::invalid_argument, "dpo: a batch of " + std::to_string(b.pairs) + " pairs × " +
                                                  std::to_string(b.seq_len) + " tokens needs a model of batch " +
                                                  std::to_string(2 * b.pairs) + ", got batch " +
                                                  std::to_string(m.batch()) + " seq_len " +
                                                  std::to_string(m.seq_len()));
  return ok_status();
}

}  // namespace

result<std::vector<float>> dpo_driver::reference_logprobs(const pair_batch& b) {
  if (auto st = check_fit(ref_, b); !st) return st.err();
  if (auto r = ref_.forward(b.inputs, b.targets); !r) return r.err();
  std::vector<float> out(static_cast<std::size_t>(2 * b.pairs));
  sequence_logprobs(ref_, b, tok_, out);
  return out;
}

result<dpo_metrics> dpo_driver::run(const pair_batch& b, bool backward, float loss_scale, bool accumulate,
                                    bool with_kl, std::span<const float> ref_seq) {
  if (auto st = check_fit(pi_, b); !st) return st.err();
  if (auto st = check_fit(ref_, b); !st) return st.err();
  const std::size_t rows = std::size_t(2 * b.pairs), P = std::size_t(b.pairs);
  if (!ref_seq.empty() && ref_seq.size() != rows)
    return make_error(errc::invalid_argument, "dpo: cached reference log-probs must hold 2·pairs values");
  ref_seq_.resize(rows);
  pi_seq_.resize(rows);
  d_seq_.resize(rows);
  // Unweighted forwards: every token's log p is computed; the mask selects later.
  if (ref_seq.empty() || with_kl) {
    if (auto r = ref_.forward(b.inputs, b.targets); !r) return r.err();
    sequence_logprobs(ref_, b, tok_, ref_seq_);
    if (with_kl) ref_logits_.assign(ref_.logits().begin(), ref_.logits().end());
  } else {
    std::copy(ref_seq.begin(), ref_seq.end(), ref_seq_.begin());
  }
  if (auto r = pi_.forward(b.inputs, b.targets); !r) return r.err();
  sequence_logprobs(pi_, b, tok_, pi_seq_);
  dpo_metrics m;
  const std::span<float> d(d_seq_);
  m.pref = dpo_loss(o_, std::span(pi_seq_).first(P), std::span(pi_seq_).subspan(P),
                    std::span(ref_seq_).first(P), std::span(ref_seq_).subspan(P), d.first(P), d.subspan(P));
  if (with_kl) {
    const auto& c = pi_.config();
    const kl_sum k = token_kl(pi_.logits(), ref_logits_, b.mask, c.vocab, c.padded_vocab);
    m.kl = k.rows ? k.sum / double(k.rows) : 0.0;
  }
  if (!backward) return m;
  const std::size_t T = std::size_t(b.seq_len);
  dlogp_.resize(rows * T);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t t = 0; t < T; ++t) dlogp_[r * T + t] = loss_scale * b.mask[r * T + t] * d_seq_[r];
  if (auto st = pi_.backward_from_token_grads(dlogp_, accumulate); !st) return st.err();
  return m;
}

namespace {

void add_scaled(dpo_metrics& into, const dpo_metrics& m, double w) {
  into.pref.loss += w * m.pref.loss;
  into.pref.accuracy += w * m.pref.accuracy;
  into.pref.reward_margin += w * m.pref.reward_margin;
  into.pref.chosen_reward += w * m.pref.chosen_reward;
  into.pref.rejected_reward += w * m.pref.rejected_reward;
  into.pref.policy_accuracy += w * m.pref.policy_accuracy;
  if (m.kl >= 0) into.kl = std::max(into.kl, 0.0) + w * m.kl;
}

}  // namespace

result<dpo_metrics> dpo_driver::evaluate(std::span<const pair_batch> batches) {
  dpo_metrics total;
  total.pref = {};
  for (const pair_batch& b : batches) {
    auto m = run(b, false, 1.0f, false, true);
    if (!m) return m.err();
    add_scaled(total, *m, 1.0 / double(batches.size()));
  }
  return total;
}

result<dpo_step_result> dpo_driver::step(engine::adamw& opt, const engine::lr_schedule& s, float grad_clip,
                                         int step, std::span<const pair_batch> micro,
                                         std::span<const std::vector<float>> ref_seqs, const engine::data_parallel* dp) {
  if (micro.empty()) return make_error(errc::invalid_argument, "dpo: a step needs at least one micro-batch");
  if (!ref_seqs.empty() && ref_seqs.size() != micro.size())
    return make_error(errc::invalid_argument, "dpo: one cached reference per micro-batch, or none");
  if (dp && (dp->total_micro < int(micro.size()) || !dp->all_reduce_sum))
    return make_error(errc::invalid_argument, "dpo: data_parallel needs total_micro >= this member's micro-batches "
                                              "and an all_reduce_sum");
  dpo_step_result out;
  const float k = float(dp ? dp->total_micro : int(micro.size()));
  for (std::size_t j = 0; j < micro.size(); ++j) {
    auto m = run(micro[j], true, 1.0f / k, j > 0, false,
                 ref_seqs.empty() ? std::span<const float>() : std::span<const float>(ref_seqs[j]));
    if (!m) return m.err();
    add_scaled(out.m, *m, 1.0 / k);
  }
  if (dp) {  // the whole step's gradient and metrics, on every member
    if (auto st = dp->all_reduce_sum(pi_.grads()); !st) return st.err();
    dpo_stats& p = out.m.pref;
    float v[6] = {float(p.loss), float(p.accuracy), float(p.reward_margin), float(p.chosen_reward),
                  float(p.rejected_reward), float(p.policy_accuracy)};
    if (auto st = dp->all_reduce_sum(std::span<float>(v, 6)); !st) return st.err();
    p = {v[0], v[1], v[2], v[3], v[4], v[5]};
  }
  const double norm = engine::global_norm(pi_.grads());
  out.grad_norm = float(norm);
  out.lr = s.at(step);
  const engine::gpt2::update_target to = pi_.params_for_update();  // bf16: its copy in the same pass
  opt.step(to.params, pi_.grads(), out.lr, engine::clip_scale(norm, grad_clip), to.bf16);
  return out;
}

}  // namespace loom::align
