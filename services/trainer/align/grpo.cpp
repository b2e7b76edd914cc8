#include "services/trainer/align/grpo.hpp"

#include "services/trainer/align/losses.hpp"
#include "services/trainer/run/sampler.hpp"

#include <algorithm>
#include <cmath>

namespace loom::align {
namespace {

// Each row draws from its own rng64 (sampler.hpp), seeded from (seed, row) only.
using trainer::rng64;

// Mean policy entropy over masked rows of logits (N, Vp).
double mean_entropy(std::span<const float> logits, std::span<const float> mask, int V, int Vp) {
  double sum = 0;
  std::size_t n = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (!(mask[i] > 0)) continue;
    const float* z = logits.data() + i * std::size_t(Vp);
    const double mx = *std::max_element(z, z + V);
    double s = 0;
    for (int v = 0; v < V; ++v) s += std::exp(double(z[v]) - mx);
    const double lz = mx + std::log(s);
    double h = 0;
    for (int v = 0; v < V; ++v) {
      const double lp = double(z[v]) - lz;
      h -= std::exp(lp) * lp;
    }
    sum += h;
    ++n;
  }
  return n ? sum / double(n) : 0.0;
}

}  // namespace

reward_fn reward_model_reward(reward_driver& rm) {
  return [&rm](const rollout_batch& b) { return rm.score(b.inputs, b.last); };
}

result<rollout_batch> grpo_driver::sample(std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed) {
  const int B = pi_.batch(), T = pi_.seq_len(), V = pi_.config().vocab;
  const std::size_t Vp = std::size_t(pi_.config().padded_vocab), uT = std::size_t(T);
  auto bad = [](const std::string& m) { return make_error(errc::invalid_argument, "grpo: " + m); };
  if (o_.group < 1 || B % o_.group != 0 || prompts.size() * std::size_t(o_.group) != std::size_t(B))
    return bad("need batch / group = " + std::to_string(B / std::max(1, o_.group)) + " prompts, got " +
               std::to_string(prompts.size()));
  rollout_batch b;
  b.rows = B;
  b.seq_len = T;
  b.prompt_index.resize(std::size_t(B));
  b.response.assign(std::size_t(B), {});
  b.inputs.assign(std::size_t(B) * uT, 0);
  std::vector<int> len(static_cast<std::size_t>(B));
  std::vector<bool> done(static_cast<std::size_t>(B), false);
  std::vector<rng64> rng;
  for (int r = 0; r < B; ++r) {
    const auto& p = prompts[std::size_t(r / o_.group)];
    if (p.empty() || p.size() >= uT) return bad("prompt " + std::to_string(r / o_.group) + " is empty or fills the window");
    for (auto id : p)
      if (id < 0 || id >= V) return bad("a prompt id outside the vocabulary");
    b.prompt_index[std::size_t(r)] = r / o_.group;
    std::copy(p.begin(), p.end(), b.inputs.begin() + std::ptrdiff_t(std::size_t(r) * uT));
    len[std::size_t(r)] = int(p.size());
    rng.push_back({seed * 0x100000001B3ull + std::uint64_t(r)});
  }
  for (int n = 0; n < o_.max_new_tokens; ++n) {
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    if (auto f = pi_.forward(b.inputs); !f) return f.err();
    for (int r = 0; r < B; ++r) {
      const std::size_t ur = std::size_t(r);
      if (done[ur]) continue;
      const auto row = pi_.logits().subspan((ur * uT + std::size_t(len[ur] - 1)) * Vp, std::size_t(V));
      const auto id = std::int32_t(trainer::pick(row, o_.temperature, o_.top_k, rng[ur].uniform(), pick_scratch_));
      b.inputs[ur * uT + std::size_t(len[ur])] = id;
      b.response[ur].push_back(id);
      ++len[ur];
      if (id == o_.stop_token || len[ur] == T) done[ur] = true;
    }
  }
  b.targets.assign(b.inputs.size(), 0);
  b.mask.assign(b.inputs.size(), 0.0f);
  b.last.resize(std::size_t(B));
  for (int r = 0; r < B; ++r) {
    const std::size_t ur = std::size_t(r), n = std::size_t(len[ur]), pn = n - b.response[ur].size();
    for (std::size_t t = 0; t + 1 < n; ++t) {
      b.targets[ur * uT + t] = b.inputs[ur * uT + t + 1];
      b.mask[ur * uT + t] = t + 1 >= pn ? 1.0f : 0.0f;
    }
    b.last[ur] = int(n - 1);
  }
  return b;
}

result<std::vector<float>> grpo_driver::score(const rollout_batch& b, grpo_stats& st) {
  auto r = reward_(b);
  if (!r) return r.err();
  if (r->size() != std::size_t(b.rows))
    return make_error(errc::invalid_argument, "grpo: the reward function gave " + std::to_string(r->size()) +
                                                  " rewards for " + std::to_string(b.rows) + " samples");
  double s = 0, s2 = 0, len = 0;
  for (std::size_t i = 0; i < r->size(); ++i) {
    s += (*r)[i];
    s2 += double((*r)[i]) * (*r)[i];
    len += double(b.response[i].size());
  }
  const double n = double(r->size());
  st.mean_reward = s / n;
  st.reward_std = std::sqrt(std::max(0.0, s2 / n - st.mean_reward * st.mean_reward));
  st.mean_length = len / n;
  return r;
}

result<grpo_stats> grpo_driver::step(engine::adamw& opt, const engine::lr_schedule& s, float grad_clip, int step,
                                     std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed) {
  auto b = sample(prompts, seed);
  if (!b) return b.err();
  grpo_stats st;
  auto r = score(*b, st);
  if (!r) return r.err();
  const std::size_t B = std::size_t(b->rows), T = std::size_t(b->seq_len), G = std::size_t(o_.group);
  // Group-relative advantages.
  std::vector<double> adv(B);
  for (std::size_t g = 0; g < B; g += G) {
    double m = 0, v = 0;
    for (std::size_t i = g; i < g + G; ++i) m += (*r)[i];
    m /= double(G);
    for (std::size_t i = g; i < g + G; ++i) v += ((*r)[i] - m) * ((*r)[i] - m);
    const double sd = std::sqrt(v / double(G));
    for (std::size_t i = g; i < g + G; ++i) adv[i] = ((*r)[i] - m) / (sd + 1e-6);
  }
  tok_.resize(B * T);
  ref_tok_.resize(B * T);
  if (auto f = ref_.forward(b->inputs, b->targets); !f) return f.err();
  ref_.token_logprobs(ref_tok_);
  if (auto f = pi_.forward(b->inputs, b->targets); !f) return f.err();
  pi_.token_logprobs(tok_);
  dlogp_.assign(B * T, 0.0f);
  double kl = 0;
  std::size_t ntok = 0;
  for (std::size_t i = 0; i < B; ++i) {
    const double inv_len = 1.0 / double(std::max<std::size_t>(1, b->response[i].size()));
    for (std::size_t t = 0; t < T; ++t) {
      if (!(b->mask[i * T + t] > 0)) continue;
      const double d = double(ref_tok_[i * T + t]) - tok_[i * T + t];  // ref − π
      kl += std::exp(d) - d - 1.0;
      ++ntok;
      dlogp_[i * T + t] = float(inv_len / double(B) * (-adv[i] + o_.kl_coef * (1.0 - std::exp(d))));
    }
  }
  st.kl = ntok ? kl / double(ntok) : 0.0;
  if (auto bw = pi_.backward_from_token_grads(dlogp_, false); !bw) return bw.err();
  const double norm = engine::global_norm(pi_.grads());
  st.grad_norm = float(norm);
  st.lr = s.at(step);
  const engine::gpt2::update_target to = pi_.params_for_update();  // bf16: its copy in the same pass
  opt.step(to.params, pi_.grads(), st.lr, engine::clip_scale(norm, grad_clip), to.bf16);
  return st;
}

result<grpo_stats> grpo_driver::evaluate(std::span<const std::vector<std::int32_t>> prompts, std::uint64_t seed) {
  auto b = sample(prompts, seed);
  if (!b) return b.err();
  grpo_stats st;
  if (auto r = score(*b, st); !r) return r.err();
  const auto& c = pi_.config();
  if (auto f = ref_.forward(b->inputs, b->targets); !f) return f.err();
  ref_logits_.assign(ref_.logits().begin(), ref_.logits().end());
  if (auto f = pi_.forward(b->inputs, b->targets); !f) return f.err();
  const kl_sum k = token_kl(pi_.logits(), ref_logits_, b->mask, c.vocab, c.padded_vocab);
  st.kl = k.rows ? k.sum / double(k.rows) : 0.0;
  st.entropy = mean_entropy(pi_.logits(), b->mask, c.vocab, c.padded_vocab);
  return st;
}

}  // namespace loom::align
