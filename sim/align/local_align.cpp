#include "sim/align/local_align.hpp"

#include "libs/engine/kernels.hpp"
#include "libs/engine/train_step.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace loom::align {
namespace {

result<std::vector<pair_batch>> batch_up(const std::vector<preference_record>& recs, int P, int T) {
  std::vector<pair_batch> out;
  std::vector<pair_tokens> chunk;
  for (const auto& r : recs) {
    chunk.push_back(render_pair(r, encode_bytes, synthetic_render()));
    if (int(chunk.size()) < P) continue;
    auto b = make_pair_batch(chunk, T);
    if (!b) return b.err();
    out.push_back(std::move(*b));
    chunk.clear();
  }
  return out;
}

}  // namespace

result<local_batches> synthetic_batches(const local_align_config& cfg) {
  const preference_split s = synthetic_preferences(cfg.data);
  local_batches b;
  for (auto [recs, into] : {std::pair{&s.train, &b.train}, {&s.held_out, &b.held_out}}) {
    auto r = batch_up(*recs, cfg.pairs, cfg.seq_len);
    if (!r) return r.err();
    *into = std::move(*r);
  }
  auto w = batch_up(synthetic_warmup(s), cfg.pairs, cfg.seq_len);
  if (!w) return w.err();
  b.warmup = std::move(*w);
  if (b.train.empty() || b.held_out.empty())
    return make_error(errc::invalid_argument, "local_align: fewer pairs than one batch of " + std::to_string(cfg.pairs));
  return b;
}

result<engine::gpt2> clone(const engine::gpt2& m) {
  auto c = engine::gpt2::create(m.config(), m.batch(), m.seq_len());
  if (!c) return c.err();
  std::copy(m.params().begin(), m.params().end(), c->params().begin());
  return c;
}

result<engine::gpt2> sft_start(const local_align_config& cfg, const local_batches& data) {
  engine::kernels::set_threads(cfg.threads);
  auto m = engine::gpt2::create(cfg.model, 2 * cfg.pairs, cfg.seq_len);
  if (!m) return m.err();
  m->init_random(cfg.seed);
  engine::adamw opt(m->layout().total, {}, m->layout().ranges());
  const engine::lr_schedule sched{cfg.warmup_lr, cfg.warmup_lr / 10, 10, cfg.warmup_steps};
  for (int s = 0; s < cfg.warmup_steps; ++s) {
    const pair_batch& b = data.warmup[std::size_t(s) % data.warmup.size()];
    const engine::micro_batch mb{b.inputs, b.targets, b.mask};
    if (auto r = engine::train_step(*m, opt, sched, cfg.grad_clip, s, std::span(&mb, 1)); !r) return r.err();
  }
  return m;
}

result<dpo_run> run_dpo(const local_align_config& cfg, engine::gpt2& policy, const local_batches& data) {
  engine::kernels::set_threads(cfg.threads);
  auto ref = clone(policy);
  if (!ref) return ref.err();
  dpo_driver d(policy, *ref, cfg.dpo);
  dpo_run out;
  auto before = d.evaluate(data.held_out);
  if (!before) return before.err();
  out.before = *before;
  engine::adamw opt(policy.layout().total, {}, policy.layout().ranges());
  const engine::lr_schedule sched{cfg.lr, cfg.lr / 10, std::max(1, cfg.steps / 10), cfg.steps};
  for (int s = 0; s < cfg.steps; ++s) {
    const pair_batch& b = data.train[std::size_t(s) % data.train.size()];
    auto r = d.step(opt, sched, cfg.grad_clip, s, std::span(&b, 1));
    if (!r) return r.err();
    out.train_loss.push_back(float(r->m.pref.loss));
  }
  auto after = d.evaluate(data.held_out);
  if (!after) return after.err();
  out.after = *after;
  return out;
}

result<rm_run> run_reward_model(const local_align_config& cfg, engine::gpt2& backbone, reward_head& head,
                                const local_batches& data) {
  engine::kernels::set_threads(cfg.threads);
  head.init(cfg.seed);
  reward_driver d(backbone, head);
  rm_run out;
  auto before = d.evaluate(data.held_out);
  if (!before) return before.err();
  out.before = *before;
  engine::adamw body(backbone.layout().total, {}, backbone.layout().ranges());
  engine::adamw hopt(head.params().size(), {}, head.ranges());
  const engine::lr_schedule sched{cfg.lr, cfg.lr / 10, std::max(1, cfg.steps / 10), cfg.steps};
  for (int s = 0; s < cfg.steps; ++s) {
    const pair_batch& b = data.train[std::size_t(s) % data.train.size()];
    auto r = d.step(body, hopt, sched, cfg.grad_clip, s, std::span(&b, 1));
    if (!r) return r.err();
    out.train_loss.push_back(float(r->bt.loss));
  }
  auto after = d.evaluate(data.held_out);
  if (!after) return after.err();
  out.after = *after;
  return out;
}

}  // namespace loom::align

namespace loom::align {

reward_fn synthetic_format_reward() {
  return [](const rollout_batch& b) -> result<std::vector<float>> {
    std::vector<float> r(static_cast<std::size_t>(b.rows));
    for (std::size_t i = 0; i < r.size(); ++i) {
      std::string text(b.response[i].begin(), b.response[i].end());
      if (!text.empty() && text.back() == '\n') text.pop_back();
      r[i] = float(synthetic_format_score(text));
    }
    return r;
  };
}

namespace {

// Mean statistics over batches; the reward's std over all samples together.
grpo_stats pool(const std::vector<grpo_stats>& v) {
  grpo_stats out;
  double m2 = 0;
  for (const auto& s : v) {
    out.mean_reward += s.mean_reward;
    m2 += s.reward_std * s.reward_std + s.mean_reward * s.mean_reward;
    out.kl += s.kl;
    out.entropy += s.entropy;
    out.mean_length += s.mean_length;
  }
  const double n = double(v.size());
  out.mean_reward /= n;
  out.kl /= n;
  out.entropy /= n;
  out.mean_length /= n;
  out.reward_std = std::sqrt(std::max(0.0, m2 / n - out.mean_reward * out.mean_reward));
  return out;
}

}  // namespace

result<grpo_run> run_grpo(const local_align_config& cfg, engine::gpt2& policy, reward_fn reward) {
  engine::kernels::set_threads(cfg.threads);
  const preference_split s = synthetic_preferences(cfg.data);
  const int per_batch = policy.batch() / cfg.grpo.group;
  if (per_batch < 1 || int(s.held_out.size()) < cfg.eval_prompts || int(s.train.size()) < per_batch)
    return make_error(errc::invalid_argument, "local_align: too few prompts for a GRPO batch");
  const render_options ro = synthetic_render();
  auto tokens = [&](const std::vector<preference_record>& recs) {
    std::vector<std::vector<std::int32_t>> out;
    for (const auto& r : recs) out.push_back(encode_bytes(ro.prompt_prefix + r.prompt + ro.response_prefix));
    return out;
  };
  const auto train_prompts = tokens(s.train), eval_prompts = tokens(s.held_out);
  auto ref = clone(policy);
  if (!ref) return ref.err();
  if (!reward) reward = synthetic_format_reward();
  grpo_driver train(policy, *ref, reward, cfg.grpo);
  // Evaluation scores each sample with the training reward and, beside it, the rule.
  double rule_sum = 0;
  std::size_t rule_n = 0;
  const reward_fn rule = synthetic_format_reward();
  grpo_driver eval(policy, *ref, [&](const rollout_batch& b) -> result<std::vector<float>> {
    auto g = rule(b);
    if (!g) return g.err();
    for (float x : *g) rule_sum += x;
    rule_n += g->size();
    return reward(b);
  }, cfg.grpo);
  auto evaluate = [&]() -> result<grpo_stats> {
    rule_sum = 0;
    rule_n = 0;
    std::vector<grpo_stats> all;
    for (int at = 0; at + per_batch <= cfg.eval_prompts; at += per_batch) {
      auto st = eval.evaluate(std::span(eval_prompts).subspan(std::size_t(at), std::size_t(per_batch)),
                              cfg.seed * 1000 + std::uint64_t(at));
      if (!st) return st.err();
      all.push_back(*st);
    }
    return pool(all);
  };
  grpo_run out;
  auto before = evaluate();
  if (!before) return before.err();
  out.before = *before;
  out.rule_before = rule_n ? rule_sum / double(rule_n) : 0.0;
  engine::adamw opt(policy.layout().total, {}, policy.layout().ranges());
  const engine::lr_schedule sched{cfg.grpo_lr, cfg.grpo_lr / 10, std::max(1, cfg.grpo_steps / 10), cfg.grpo_steps};
  const std::size_t nbatches = train_prompts.size() / std::size_t(per_batch);
  for (int st = 0; st < cfg.grpo_steps; ++st) {
    const std::size_t at = (std::size_t(st) % nbatches) * std::size_t(per_batch);
    auto r = train.step(opt, sched, cfg.grad_clip, st, std::span(train_prompts).subspan(at, std::size_t(per_batch)),
                        cfg.seed * 7919 + std::uint64_t(st));
    if (!r) return r.err();
    out.train_reward.push_back(float(r->mean_reward));
  }
  auto after = evaluate();
  if (!after) return after.err();
  out.after = *after;
  out.rule_after = rule_n ? rule_sum / double(rule_n) : 0.0;
  return out;
}

}  // namespace loom::align
