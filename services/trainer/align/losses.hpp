// Preference losses over sequence-level quantities, with their gradients in
// closed form: Bradley–Terry for reward models (inputs: scalar rewards) and
// DPO / IPO for policies (inputs: per-sequence sums of response-token
// log-probabilities of the policy and of a frozen reference). Also the exact
// per-token KL between two models' logits. Pure functions over spans: no
// engine, no allocation, any thread. Every loss is the mean over P pairs.
#pragma once

#include <cstddef>
#include <span>

namespace loom::align {

// Bradley–Terry: L = mean −log σ(r_c − r_r).
//   dL/dr_c = −σ(−(r_c − r_r)) / P,  dL/dr_r = +σ(−(r_c − r_r)) / P
struct bt_stats {
  double loss = 0;
  double accuracy = 0;  // share of pairs with r_c > r_r (a tie counts ½)
  double margin = 0;    // mean r_c − r_r
};
// d_chosen, d_rejected receive dL/dr (either may be empty: not wanted).
// REQUIRES: equal sizes P >= 1.
bt_stats bradley_terry(std::span<const float> r_chosen, std::span<const float> r_rejected,
                       std::span<float> d_chosen = {}, std::span<float> d_rejected = {});

enum class preference_loss {
  dpo,  // Rafailov et al. 2023: −log σ(β·h)
  ipo,  // Azar et al. 2023: (h − 1/(2β))²
};

// h = (π_c − ref_c) − (π_r − ref_r), each a sum of response-token log-probs.
//   dpo: L = mean −log σ(β h);        dL/dπ_c = −β σ(−β h) / P = −dL/dπ_r
//   ipo: L = mean (h − 1/(2β))²;      dL/dπ_c = 2 (h − 1/(2β)) / P = −dL/dπ_r
struct dpo_options {
  float beta = 0.1f;
  preference_loss kind = preference_loss::dpo;
};

struct dpo_stats {
  double loss = 0;
  double accuracy = 0;       // share of pairs with h > 0 (a tie counts ½): the implicit reward ranks chosen first
  double reward_margin = 0;  // mean β h: the implicit rewards' margin
  double chosen_reward = 0;  // mean β (π_c − ref_c)
  double rejected_reward = 0;
  double policy_accuracy = 0;  // share with π_c > π_r, the policy alone (tie ½)
};

// d_chosen, d_rejected receive dL/dπ (the references get none: frozen).
// REQUIRES: six spans of the same size P >= 1 (the two d spans may be empty); beta > 0.
dpo_stats dpo_loss(const dpo_options& o, std::span<const float> pi_chosen, std::span<const float> pi_rejected,
                   std::span<const float> ref_chosen, std::span<const float> ref_rejected,
                   std::span<float> d_chosen = {}, std::span<float> d_rejected = {});

// Σ over rows i with mask[i] > 0 of KL(p_i ‖ q_i) = Σ_v p_iv (log p_iv − log q_iv),
// p and q the softmaxes of logits rows (N, Vp) over their first V columns;
// returns {sum, rows counted}. Used for the KL of a policy to its reference.
struct kl_sum {
  double sum = 0;
  std::size_t rows = 0;
};
kl_sum token_kl(std::span<const float> logits_p, std::span<const float> logits_q, std::span<const float> mask,
                int V, int Vp);

// log σ(x) and σ(x) without overflow.
double log_sigmoid(double x);
double sigmoid(double x);

}  // namespace loom::align
