#include "services/trainer/align/reward_model.hpp"

#include <cmath>
#include <cstring>
#include <random>

namespace loom::align {

void reward_head::init(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> n01;
  const double sd = 1.0 / std::sqrt(double(C_));
  for (int c = 0; c < C_; ++c) p_[std::size_t(c)] = float(sd * n01(rng));
  p_[std::size_t(C_)] = 0.0f;
}

std::vector<model::param_range> reward_head::ranges() const { return {{0, p_.size(), false}}; }

float reward_head::score(const float* h) const {
  double s = p_[std::size_t(C_)];
  for (int c = 0; c < C_; ++c) s += double(p_[std::size_t(c)]) * h[c];
  return float(s);
}

std::vector<ckpt::tensor_view> reward_head::tensors() const {
  return {{"reward_head.w", ckpt::dtype::F32, {std::uint64_t(C_)}, p_.data(), std::size_t(C_) * 4},
          {"reward_head.b", ckpt::dtype::F32, {1}, p_.data() + C_, 4}};
}

status reward_head::load(const ckpt::safetensors_file& f) {
  const ckpt::tensor_info* w = f.find("reward_head.w");
  const ckpt::tensor_info* b = f.find("reward_head.b");
  if (!w || !b) return make_error(errc::not_found, "reward head: the checkpoint has no reward_head.w and reward_head.b");
  if (w->type != ckpt::dtype::F32 || b->type != ckpt::dtype::F32 || w->shape != std::vector<std::uint64_t>{std::uint64_t(C_)} ||
      b->shape != std::vector<std::uint64_t>{1})
    return make_error(errc::invalid_argument, "reward head: expected F32 reward_head.w [" + std::to_string(C_) +
                                                  "] and reward_head.b [1]");
  std::memcpy(p_.data(), w->data.data(), std::size_t(C_) * 4);
  std::memcpy(p_.data() + C_, b->data.data(), 4);
  return ok_status();
}

result<std::vector<float>> reward_driver::score(std::span<const std::int32_t> inputs, std::span<const int> last) {
  const int B = m_.batch(), T = m_.seq_len();
  if (last.size() != std::size_t(B))
    return make_error(errc::invalid_argument, "reward model: need one last-token index per row");
  for (int l : last)
    if (l < 0 || l >= T) return make_error(errc::invalid_argument, "reward model: a last-token index outside [0, T)");
  if (auto st = m_.forward_hidden(inputs); !st) return st.err();
  const std::size_t C = std::size_t(head_.channels());
  std::vector<float> r(static_cast<std::size_t>(B));
  for (int row = 0; row < B; ++row)
    r[std::size_t(row)] = head_.score(m_.hidden().data() + (std::size_t(row) * T + last[std::size_t(row)]) * C);
  return r;
}

result<bt_stats> reward_driver::run(const pair_batch& b, bool backward, float loss_scale, bool accumulate) {
  if (m_.batch() != 2 * b.pairs || m_.seq_len() != b.seq_len)
    return make_error(errc::invalid_argument, "reward model: a batch of " + std::to_string(b.pairs) +
                                                  " pairs needs a backbone of batch " + std::to_string(2 * b.pairs) +
                                                  " and seq_len " + std::to_string(b.seq_len));
  auto r = score(b.inputs, b.last);
  if (!r) return r.err();
  r_ = std::move(*r);
  const std::size_t P = std::size_t(b.pairs), C = std::size_t(head_.channels()), T = std::size_t(b.seq_len);
  dr_.resize(2 * P);
  const std::span<float> dr(dr_);
  const bt_stats s = bradley_terry(std::span(r_).first(P), std::span(r_).subspan(P), dr.first(P), dr.subspan(P));
  if (!backward) return s;
  // Head: dw = Σ dr·h, db = Σ dr; backbone: dh = dr·w at each row's last token.
  std::span<float> g = head_.grads();
  if (!accumulate) std::fill(g.begin(), g.end(), 0.0f);
  dh_.assign(2 * P * T * C, 0.0f);
  const std::span<const float> w = std::span<const float>(head_.params()).first(C);
  for (std::size_t row = 0; row < 2 * P; ++row) {
    const float d = loss_scale * dr_[row];
    const std::size_t at = (row * T + std::size_t(b.last[row])) * C;
    const float* h = m_.hidden().data() + at;
    for (std::size_t c = 0; c < C; ++c) {
      g[c] += d * h[c];
      dh_[at + c] = d * w[c];
    }
    g[C] += d;
  }
  if (auto st = m_.backward_from_hidden(dh_, accumulate); !st) return st.err();
  return s;
}

result<bt_stats> reward_driver::evaluate(std::span<const pair_batch> batches) {
  bt_stats total;
  for (const pair_batch& b : batches) {
    auto s = run(b, false);
    if (!s) return s.err();
    const double w = 1.0 / double(batches.size());
    total.loss += w * s->loss;
    total.accuracy += w * s->accuracy;
    total.margin += w * s->margin;
  }
  return total;
}

result<rm_step_result> reward_driver::step(engine::adamw& body_opt, engine::adamw& head_opt,
                                           const engine::lr_schedule& s, float grad_clip, int step,
                                           std::span<const pair_batch> micro, const engine::data_parallel* dp) {
  if (micro.empty()) return make_error(errc::invalid_argument, "reward model: a step needs at least one micro-batch");
  if (dp && (dp->total_micro < int(micro.size()) || !dp->all_reduce_sum))
    return make_error(errc::invalid_argument, "reward model: data_parallel needs total_micro >= this member's "
                                              "micro-batches and an all_reduce_sum");
  rm_step_result out;
  const float k = float(dp ? dp->total_micro : int(micro.size()));
  for (std::size_t j = 0; j < micro.size(); ++j) {
    auto st = run(micro[j], true, 1.0f / k, j > 0);
    if (!st) return st.err();
    out.bt.loss += st->loss / k;
    out.bt.accuracy += st->accuracy / k;
    out.bt.margin += st->margin / k;
  }
  if (dp) {  // the whole step's gradients and metrics, on every member
    if (auto st = dp->all_reduce_sum(m_.grads()); !st) return st.err();
    if (auto st = dp->all_reduce_sum(head_.grads()); !st) return st.err();
    float v[3] = {float(out.bt.loss), float(out.bt.accuracy), float(out.bt.margin)};
    if (auto st = dp->all_reduce_sum(std::span<float>(v, 3)); !st) return st.err();
    out.bt = {v[0], v[1], v[2]};
  }
  const double nb = engine::global_norm(m_.grads()), nh = engine::global_norm(head_.grads());
  const double norm = std::sqrt(nb * nb + nh * nh);
  out.grad_norm = float(norm);
  out.lr = s.at(step);
  const float scale = engine::clip_scale(norm, grad_clip);
  const engine::gpt2::update_target to = m_.params_for_update();  // bf16: its copy in the same pass
  body_opt.step(to.params, m_.grads(), out.lr, scale, to.bf16);
  head_opt.step(head_.params(), head_.grads(), out.lr, scale);
  return out;
}

}  // namespace loom::align
