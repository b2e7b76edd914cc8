#include "services/trainer/diloco/local_rounds.hpp"

#include "libs/codec/error_feedback.hpp"
#include "libs/diloco/fragment_plan.hpp"
#include "libs/diloco/site_state.hpp"
#include "services/trainer/engine/kernels.hpp"
#include "services/trainer/engine/model.hpp"
#include "services/trainer/engine/optimizer.hpp"
#include "services/trainer/engine/train_step.hpp"
#include "services/trainer/local/byte_text.hpp"

#include <algorithm>
#include <cmath>
#include <deque>
#include <random>
#include <string>

namespace loom::trainer {
namespace {


std::uint64_t site_seed(std::uint64_t seed, int site) { return seed * 1'000'003u + std::uint64_t(site) + 1; }

status check(const local_config& c, const local_data& d) {
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
  return c.outer.validate();
}

struct trainer_parts {
  engine::gpt2 model;
  engine::adamw opt;
};

result<trainer_parts> make_trainer(const local_config& c) {
  engine::kernels::set_threads(c.threads);
  auto m = engine::gpt2::create(c.model, c.batch, c.seq_len);
  if (!m) return m.err();
  m->init_random(c.seed);  // every site and the DP model start from the same θ0
  engine::adamw opt(m->layout().total, engine::adamw_config{}, m->layout().ranges());
  return trainer_parts{std::move(*m), std::move(opt)};
}

engine::lr_schedule schedule_of(const local_config& c) {
  return {c.lr, c.lr * c.min_lr_ratio, c.warmup, c.steps};
}

// Mean loss of `params` over eval_batches fixed windows of the validation tokens.
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

// A downlink message waiting `overlap` steps before the sites apply it.
struct pending_update {
  int apply_after = 0;  // inner step
  int fragment = 0;
  std::uint64_t version = 0;
  std::vector<float> update;  // U' as the sites decode it (decoded once, when sent)
  std::size_t bytes = 0;      // the payload's size on the wire
};

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

result<local_result> run_sync_dp(const local_config& c, const local_data& d) {
  if (auto s = check(c, d); !s) return s.err();
  auto tr = make_trainer(c);
  if (!tr) return tr.err();
  const int M = static_cast<int>(d.shards.size());
  std::vector<window_stream> streams;
  for (int s = 0; s < M; ++s) streams.emplace_back(d.shards[s], c.batch, c.seq_len, site_seed(c.seed, s));
  const auto sched = schedule_of(c);
  local_result r;
  r.params = tr->model.layout().total;
  std::vector<engine::micro_batch> micro(static_cast<std::size_t>(M));
  for (int t = 0; t < c.steps; ++t) {
    for (int s = 0; s < M; ++s) micro[s] = streams[s].next();
    auto st = engine::train_step(tr->model, tr->opt, sched, c.grad_clip, t, micro);
    if (!st) return st.err();
    r.train_loss.push_back(st->loss);
  }
  r.bytes_up = r.bytes_down = std::uint64_t(M) * ring_fp32_bytes(r.params, M, c.steps) / 2;  // every site's
  auto v = validation_loss(c, d.validation, tr->model.params());
  if (!v) return v.err();
  r.validation_loss = *v;
  return r;
}

result<local_result> run_diloco(const local_config& c, const local_data& d) {
  if (auto s = check(c, d); !s) return s.err();
  const int M = static_cast<int>(d.shards.size());
  std::vector<trainer_parts> sites;
  std::vector<window_stream> streams;
  for (int s = 0; s < M; ++s) {
    auto tr = make_trainer(c);
    if (!tr) return tr.err();
    sites.push_back(std::move(*tr));
    streams.emplace_back(d.shards[s], c.batch, c.seq_len, site_seed(c.seed, s));
  }
  auto plan = diloco::fragment_plan::for_gpt2(c.model, c.fragments, static_cast<std::uint64_t>(c.sync_every));
  if (!plan) return plan.err();
  const std::span<const float> theta0 = sites[0].model.params();
  auto outer = diloco::outer_optimizer::make(*plan, std::vector<float>(theta0.begin(), theta0.end()), c.outer);
  if (!outer) return outer.err();
  std::vector<diloco::site_state> anchors;
  for (int s = 0; s < M; ++s) {
    auto a = diloco::site_state::make(*plan, theta0, std::vector<std::uint64_t>(std::size_t(plan->fragments()), 0));
    if (!a) return a.err();
    anchors.push_back(std::move(*a));
  }
  // Error feedback per (site, fragment) on the uplink and per fragment on the
  // downlink; without it, a fresh residual every round (the codec alone).
  std::vector<std::vector<codec::error_feedback>> up(static_cast<std::size_t>(M));
  std::vector<codec::error_feedback> down;
  for (int p = 0; p < plan->fragments(); ++p) {
    for (int s = 0; s < M; ++s) up[s].emplace_back(plan->size(p), c.uplink);
    down.emplace_back(plan->size(p), c.downlink);
  }

  const auto sched = schedule_of(c);
  local_result r;
  r.params = plan->total();
  std::vector<float> delta(plan->max_size()), decoded(plan->max_size()), update(plan->max_size());
  std::vector<std::byte> payload;
  std::deque<pending_update> in_flight;
  // Per site: the fragments it missed while offline (it applies the latest
  // global values when back instead of an update it never saw).
  std::vector<std::vector<bool>> stale(static_cast<std::size_t>(M), std::vector<bool>(std::size_t(plan->fragments())));

  // Every site applies the updates due by inner step `up_to` (all of them: -1).
  auto land = [&](int up_to) -> status {
    while (!in_flight.empty() && (up_to < 0 || in_flight.front().apply_after <= up_to)) {
      const pending_update& u = in_flight.front();
      for (int s = 0; s < M; ++s) {
        if (stale[s][u.fragment]) continue;  // offline: catches up from the global values
        r.bytes_down += u.bytes;
        if (auto st = anchors[s].apply_update(u.fragment, u.version, u.update, sites[s].model.params()); !st)
          return st;
      }
      in_flight.pop_front();
    }
    return ok_status();
  };
  auto catch_up = [&](int s, int p) -> status {
    // Back online: the current global values of fragment p (fp32, as a
    // returning site's snapshot pull), its own unsent progress kept by the rule.
    const std::size_t n = plan->size(p);
    std::vector<float> g(n);
    plan->gather(p, outer->params(), g);
    r.bytes_down += n * 4;
    stale[s][p] = false;
    return anchors[s].apply_global(p, outer->version(p), g, sites[s].model.params());
  };

  for (int t = 0; t < c.steps; ++t) {
    float loss = 0;
    for (int s = 0; s < M; ++s) {
      const engine::micro_batch mb = streams[s].next();
      auto st = engine::train_step(sites[s].model, sites[s].opt, sched, c.grad_clip, t, std::span(&mb, 1));
      if (!st) return st.err();
      loss += st->loss / float(M);
    }
    r.train_loss.push_back(loss);
    const int step = t + 1;  // inner steps taken
    if (auto s = land(step); !s) return s.err();
    const int p = plan->due_after(static_cast<std::uint64_t>(step));
    if (p < 0) continue;
    const std::size_t n = plan->size(p);
    int joined = 0;
    for (int s = 0; s < M; ++s) {
      const bool on = !c.online || c.online(s, step);
      if (!on) {
        ++r.missed;
        stale[s][p] = true;
        continue;
      }
      if (stale[s][p])
        if (auto st = catch_up(s, p); !st) return st.err();
      if (auto st = anchors[s].pseudo_gradient(p, sites[s].model.params(), std::span(delta).first(n)); !st)
        return st.err();
      if (c.error_feedback) {
        if (auto st = up[s][p].encode_into(std::span(delta).first(n), payload); !st) return st.err();
      } else {
        if (auto st = codec::encode_into(c.uplink, std::span(delta).first(n), {}, payload); !st) return st.err();
      }
      r.bytes_up += payload.size();
      if (auto st = codec::decode(payload, std::span(decoded).first(n)); !st) return st.err();
      if (auto st = outer->accumulate(p, 1.0, std::span(decoded).first(n)); !st) return st.err();
      ++joined;
    }
    if (joined == 0) continue;  // nobody synced: the fragment waits for the next round
    auto rep = outer->step(p, std::span(update).first(n));
    if (!rep) return rep.err();
    ++r.syncs;
    if (c.error_feedback) {
      if (auto st = down[p].encode_into(std::span(update).first(n), payload); !st) return st.err();
    } else {
      if (auto st = codec::encode_into(c.downlink, std::span(update).first(n), {}, payload); !st) return st.err();
    }
    pending_update u{step + c.overlap, p, rep->version, std::vector<float>(n), payload.size()};
    if (auto st = codec::decode(payload, u.update); !st) return st.err();
    // The server applies what it sends: θ takes back U − U', the part error
    // feedback carries into later rounds (outer_optimizer::correct).
    for (std::size_t i = 0; i < n; ++i) update[i] -= u.update[i];
    if (auto st = outer->correct(p, std::span(update).first(n)); !st) return st.err();
    in_flight.push_back(std::move(u));
    if (auto s = land(step); !s) return s.err();  // overlap 0: at once
  }
  if (auto s = land(-1); !s) return s.err();  // the last updates land before the end
  auto v = validation_loss(c, d.validation, outer->params());
  if (!v) return v.err();
  r.validation_loss = *v;
  return r;
}

}  // namespace loom::trainer
