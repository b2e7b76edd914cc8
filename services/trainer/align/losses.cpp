#include "services/trainer/align/losses.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::align {

double log_sigmoid(double x) { return x >= 0 ? -std::log1p(std::exp(-x)) : x - std::log1p(std::exp(x)); }

double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

namespace {
double rank(double d) { return d > 0 ? 1.0 : d == 0 ? 0.5 : 0.0; }
}  // namespace

bt_stats bradley_terry(std::span<const float> r_chosen, std::span<const float> r_rejected,
                       std::span<float> d_chosen, std::span<float> d_rejected) {
  const std::size_t P = r_chosen.size();
  bt_stats s;
  for (std::size_t i = 0; i < P; ++i) {
    const double d = double(r_chosen[i]) - r_rejected[i];
    s.loss -= log_sigmoid(d);
    s.accuracy += rank(d);
    s.margin += d;
    const double g = sigmoid(-d) / double(P);
    if (!d_chosen.empty()) d_chosen[i] = float(-g);
    if (!d_rejected.empty()) d_rejected[i] = float(g);
  }
  s.loss /= double(P);
  s.accuracy /= double(P);
  s.margin /= double(P);
  return s;
}

dpo_stats dpo_loss(const dpo_options& o, std::span<const float> pi_chosen, std::span<const float> pi_rejected,
                   std::span<const float> ref_chosen, std::span<const float> ref_rejected,
                   std::span<float> d_chosen, std::span<float> d_rejected) {
  const std::size_t P = pi_chosen.size();
  const double beta = o.beta;
  dpo_stats s;
  for (std::size_t i = 0; i < P; ++i) {
    const double lc = double(pi_chosen[i]) - ref_chosen[i], lr = double(pi_rejected[i]) - ref_rejected[i];
    const double h = lc - lr;
    double g;  // dL_i/dh
    if (o.kind == preference_loss::dpo) {
      s.loss -= log_sigmoid(beta * h);
      g = -beta * sigmoid(-beta * h);
    } else {
      const double e = h - 1.0 / (2.0 * beta);
      s.loss += e * e;
      g = 2.0 * e;
    }
    g /= double(P);
    if (!d_chosen.empty()) d_chosen[i] = float(g);
    if (!d_rejected.empty()) d_rejected[i] = float(-g);
    s.accuracy += rank(h);
    s.reward_margin += beta * h;
    s.chosen_reward += beta * lc;
    s.rejected_reward += beta * lr;
    s.policy_accuracy += rank(double(pi_chosen[i]) - pi_rejected[i]);
  }
  for (double* x : {&s.loss, &s.accuracy, &s.reward_margin, &s.chosen_reward, &s.rejected_reward, &s.policy_accuracy})
    *x /= double(P);
  return s;
}

kl_sum token_kl(std::span<const float> logits_p, std::span<const float> logits_q, std::span<const float> mask,
                int V, int Vp) {
  kl_sum out;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!(mask[i] > 0)) continue;
    const float* p = logits_p.data() + i * std::size_t(Vp);
    const float* q = logits_q.data() + i * std::size_t(Vp);
    const double mp = *std::max_element(p, p + V), mq = *std::max_element(q, q + V);
    double sp = 0, sq = 0;
    for (int v = 0; v < V; ++v) {
      sp += std::exp(double(p[v]) - mp);
      sq += std::exp(double(q[v]) - mq);
    }
    const double lzp = mp + std::log(sp), lzq = mq + std::log(sq);
    double kl = 0;
    for (int v = 0; v < V; ++v) {
      const double lp = double(p[v]) - lzp, lq = double(q[v]) - lzq;
      kl += std::exp(lp) * (lp - lq);
    }
    out.sum += std::max(kl, 0.0);
    ++out.rows;
  }
  return out;
}

}  // namespace loom::align
