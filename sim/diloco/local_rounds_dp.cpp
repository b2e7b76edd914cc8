// local_rounds_dp: the synchronous data-parallel arm of local_rounds, the
// shared warm-up both arms start from, and how the text is split into sites.
#include "sim/diloco/local_rounds.hpp"
#include "sim/diloco/local_rounds_parts.hpp"
#include "libs/engine/train_step.hpp"
#include "sim/text/byte_text.hpp"

#include <algorithm>

namespace loom::sim {
namespace {

using detail::trainer_parts;

// `steps` sync-DP steps of tr from schedule step `first`: each step takes one
// micro-batch of every site's stream and averages their gradients.
status sync_dp_steps(const local_config& c, const local_data& d, trainer_parts& tr, const engine::lr_schedule& sched,
                     int first, int steps, std::uint64_t stream_seed, std::vector<float>* train_loss) {
  const int M = static_cast<int>(d.shards.size());
  std::vector<window_stream> streams;
  for (int s = 0; s < M; ++s) streams.emplace_back(d.shards[s], c.batch, c.seq_len, detail::site_seed(stream_seed, s));
  std::vector<engine::micro_batch> micro(static_cast<std::size_t>(M));
  for (int t = 0; t < steps; ++t) {
    for (int s = 0; s < M; ++s) micro[s] = streams[s].next();
    auto st = engine::train_step(tr.model, tr.opt, sched, c.grad_clip, first + t, micro);
    if (!st) return st.err();
    if (train_loss) train_loss->push_back(st->loss);
  }
  return ok_status();
}

}  // namespace

local_data bytes_as_sites(std::string_view text, int sites, double validation_fraction, std::size_t block) {
  local_data d;
  const std::size_t held = static_cast<std::size_t>(double(text.size()) * validation_fraction);
  const std::size_t train = text.size() - held;
  for (std::size_t i = train; i < text.size(); ++i) d.validation.push_back(static_cast<unsigned char>(text[i]));
  if (block > 0) {
    d.shards.resize(static_cast<std::size_t>(sites));
    for (std::size_t a = 0, k = 0; a < train; a += block, ++k)
      for (std::size_t i = a; i < std::min(a + block, train); ++i)
        d.shards[k % std::size_t(sites)].push_back(static_cast<unsigned char>(text[i]));
    return d;
  }
  for (int s = 0; s < sites; ++s) {
    const std::size_t a = train * std::size_t(s) / std::size_t(sites), b = train * std::size_t(s + 1) / std::size_t(sites);
    std::vector<std::int32_t> shard;
    for (std::size_t i = a; i < b; ++i) shard.push_back(static_cast<unsigned char>(text[i]));
    d.shards.push_back(std::move(shard));
  }
  return d;
}

std::uint64_t ring_fp32_bytes(std::uint64_t params, int sites, int steps) {
  // Reduce-scatter then all-gather: each member sends and receives
  // 2·(M−1)/M of the buffer per step.
  const double per_step = 2.0 * double(sites - 1) / double(sites) * double(params) * 4.0;
  return static_cast<std::uint64_t>(2.0 * per_step * double(steps));  // sent + received
}

result<local_result> run_sync_dp(const local_config& c, const local_data& d, const local_checkpoint& from) {
  if (auto s = detail::check(c, d, from); !s) return s.err();
  auto tr = detail::make_trainer(c, from);
  if (!tr) return tr.err();
  const int M = static_cast<int>(d.shards.size());
  local_result r;
  r.params = tr->model.layout().total;
  if (auto s = sync_dp_steps(c, d, *tr, detail::schedule_of(c, from.step), from.step, c.steps, c.seed, &r.train_loss);
      !s)
    return s.err();
  r.bytes_up = r.bytes_down = std::uint64_t(M) * ring_fp32_bytes(r.params, M, c.steps) / 2;  // every site's
  auto v = detail::validation_loss(c, d.validation, tr->model.params());
  if (!v) return v.err();
  r.validation_loss = *v;
  return r;
}

result<local_checkpoint> run_warm_up(const local_config& c, const local_data& d, int steps) {
  if (auto s = detail::check(c, d, {}); !s) return s.err();
  if (steps < 1) return make_error(errc::invalid_argument, "local rounds: warm-up steps must be >= 1");
  auto tr = detail::make_trainer(c, {});
  if (!tr) return tr.err();
  // Streams seeded apart from the arms' (which use c.seed): fresh windows after the warm-up.
  const std::uint64_t warm_seed = c.seed ^ 0x5741524d'55505f31ull;
  if (auto s = sync_dp_steps(c, d, *tr, detail::schedule_of(c, steps), 0, steps, warm_seed, nullptr); !s)
    return s.err();
  local_checkpoint cp;
  const auto p = tr->model.params();
  cp.params.assign(p.begin(), p.end());
  cp.adam_m.assign(tr->opt.m().begin(), tr->opt.m().end());
  cp.adam_v.assign(tr->opt.v().begin(), tr->opt.v().end());
  cp.step = steps;
  const int M = static_cast<int>(d.shards.size());
  cp.bytes_per_site = ring_fp32_bytes(cp.params.size(), M, steps);
  auto v = detail::validation_loss(c, d.validation, cp.params);
  if (!v) return v.err();
  cp.validation_loss = *v;
  return cp;
}

}  // namespace loom::sim
