// local_rounds: the DiLoCo arm (sites, codecs both ways, the outer step).
#include "services/trainer/diloco/local_rounds.hpp"

#include "libs/codec/error_feedback.hpp"
#include "libs/diloco/fragment_plan.hpp"
#include "libs/diloco/site_state.hpp"
#include "services/trainer/diloco/local_rounds_parts.hpp"
#include "services/trainer/engine/train_step.hpp"
#include "services/trainer/local/byte_text.hpp"

#include <algorithm>
#include <deque>

namespace loom::trainer {
namespace {

using detail::trainer_parts;

// A downlink message waiting `overlap` steps before the sites apply it.
struct pending_update {
  int apply_after = 0;  // inner step
  int fragment = 0;
  std::uint64_t version = 0;
  std::vector<float> update;  // U' as the sites decode it (decoded once, when sent)
  std::size_t bytes = 0;      // the payload's size on the wire
};

}  // namespace

result<local_result> run_diloco(const local_config& c, const local_data& d, const local_checkpoint& from) {
  if (auto s = detail::check(c, d, from); !s) return s.err();
  const int M = static_cast<int>(d.shards.size());
  std::vector<trainer_parts> sites;
  std::vector<window_stream> streams;
  for (int s = 0; s < M; ++s) {
    auto tr = detail::make_trainer(c, from);
    if (!tr) return tr.err();
    sites.push_back(std::move(*tr));
    streams.emplace_back(d.shards[s], c.batch, c.seq_len, detail::site_seed(c.seed, s));
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

  const auto sched = detail::schedule_of(c, from.step);
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
      auto st = engine::train_step(sites[s].model, sites[s].opt, sched, c.grad_clip, from.step + t,
                                  std::span(&mb, 1));
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
  auto v = detail::validation_loss(c, d.validation, outer->params());
  if (!v) return v.err();
  r.validation_loss = *v;
  return r;
}

}  // namespace loom::trainer
