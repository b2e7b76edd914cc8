#include "sim/diloco/local_rounds_parts.hpp"

#include "libs/engine/kernels.hpp"

#include <algorithm>
#include <string>

namespace loom::sim::detail {

std::uint64_t site_seed(std::uint64_t seed, int site) { return seed * 1'000'003u + std::uint64_t(site) + 1; }

status check(const local_config& c, const local_data& d, const local_checkpoint& from) {
  auto bad = [](std::string m) { return make_error(errc::invalid_argument, "local rounds: " + m); };
  if (auto s = c.model.validate(); !s) return s;
  if (d.shards.empty()) return bad("no sites");
  if (c.batch < 1 || c.seq_len < 1 || c.seq_len > c.model.max_seq_len) return bad("batch or seq_len out of range");
  if (c.steps < 1 || c.sync_every < 1 || c.fragments < 1 || c.overlap < 0)
    return bad("steps, sync_every, fragments must be >= 1 and overlap >= 0");
  if (c.overlap >= c.sync_every / c.fragments) return bad("overlap must be shorter than the gap between two syncs");
  for (std::size_t s = 0; s < d.shards.size(); ++s)
    if (d.shards[s].size() < std::size_t(c.seq_len) + 2) return bad("site " + std::to_string(s) + "'s shard is too short");
  if (d.validation.size() < std::size_t(c.seq_len) + 2) return bad("validation tokens too short");
  if (c.threads < 1) return bad("threads must be >= 1");
  if (from.step < 0) return bad("checkpoint step must be >= 0");
  if (!from.params.empty()) {
    const std::size_t n = model::make_param_layout(c.model).total;
    if (from.params.size() != n || from.adam_m.size() != n || from.adam_v.size() != n)
      return bad("checkpoint holds " + std::to_string(from.params.size()) + " parameters, the model " +
                 std::to_string(n));
  }
  return c.outer.validate();
}

result<trainer_parts> make_trainer(const local_config& c, const local_checkpoint& from) {
  engine::kernels::set_threads(c.threads);
  auto m = engine::gpt2::create(c.model, c.batch, c.seq_len);
  if (!m) return m.err();
  m->init_random(c.seed);  // every site and the DP model start from the same θ0
  engine::adamw opt(m->layout().total, engine::adamw_config{}, m->layout().ranges());
  if (!from.params.empty()) {
    std::copy(from.params.begin(), from.params.end(), m->params().begin());
    if (auto s = opt.restore(from.adam_m, from.adam_v, from.step); !s) return s.err();
  }
  return trainer_parts{std::move(*m), std::move(opt)};
}

engine::lr_schedule schedule_of(const local_config& c, int warm_steps) {
  return {c.lr, c.lr * c.min_lr_ratio, c.warmup, warm_steps + c.steps};
}

result<float> validation_loss(const local_config& c, const std::vector<std::int32_t>& tokens,
                              std::span<const float> params) {
  auto m = engine::gpt2::create(c.model, c.batch, c.seq_len);
  if (!m) return m.err();
  std::copy(params.begin(), params.end(), m->params().begin());
  std::vector<std::int32_t> in(std::size_t(c.batch) * c.seq_len), tgt(in.size());
  const std::size_t span = tokens.size() - std::size_t(c.seq_len) - 1;
  const std::size_t windows = std::size_t(c.eval_batches) * c.batch;
  double sum = 0;
  for (int e = 0; e < c.eval_batches; ++e) {
    for (int b = 0; b < c.batch; ++b) {
      const std::size_t start = (std::size_t(e) * c.batch + b) * span / windows;  // spread evenly
      for (int t = 0; t < c.seq_len; ++t) {
        in[std::size_t(b) * c.seq_len + t] = tokens[start + t];
        tgt[std::size_t(b) * c.seq_len + t] = tokens[start + t + 1];
      }
    }
    auto l = m->forward(in, tgt);
    if (!l) return l.err();
    sum += *l;
  }
  return static_cast<float>(sum / c.eval_batches);
}

}  // namespace loom::sim::detail
