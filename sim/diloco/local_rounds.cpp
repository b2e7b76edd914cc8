// local_rounds: the DiLoCo arm (sites, codecs both ways, the outer step).
#include "sim/diloco/local_rounds.hpp"

#include "sim/diloco/cloud.hpp"
#include "sim/diloco/local_rounds_parts.hpp"
#include "libs/engine/train_step.hpp"
#include "sim/text/byte_text.hpp"

#include <algorithm>
#include <deque>

namespace loom::sim {
namespace {

using detail::trainer_parts;

// An update the sites take `overlap` inner steps after its round closed.
struct pending_update {
  int apply_after = 0;  // inner step
  int fragment = 0;
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
  // The aggregator's round logic as the service runs it: every site's delta
  // closes a round by quorum; a round that waits for an offline site closes
  // by its deadline.
  aggregator::aggregation_spec spec;
  spec.job = "local";
  spec.gpt2 = c.model;
  spec.fragments = c.fragments;
  spec.sync_every = static_cast<std::uint64_t>(c.sync_every);
  spec.codec = c.downlink;
  spec.outer = c.outer;
  spec.error_feedback = c.error_feedback;
  auto cloud = diloco_cloud::make(spec, sites[0].model.params(), M, {c.uplink, c.error_feedback});
  if (!cloud) return cloud.err();
  const auto& plan = cloud->plan();
  const std::uint64_t tokens_per_step = std::uint64_t(c.batch) * std::uint64_t(c.seq_len);

  const auto sched = detail::schedule_of(c, from.step);
  local_result r;
  r.params = plan.total();
  std::deque<pending_update> in_flight;
  // Per site and fragment: the inner step of its last delta (its tokens since),
  // and whether it missed a round while offline (it then takes the global
  // values when back instead of an update it never saw).
  std::vector<std::vector<int>> last_sent(std::size_t(M), std::vector<int>(std::size_t(plan.fragments()), 0));
  std::vector<std::vector<bool>> stale(std::size_t(M), std::vector<bool>(std::size_t(plan.fragments())));

  // Every site that is current takes the updates due by inner step `up_to` (all of them: -1).
  auto land = [&](int up_to) -> status {
    while (!in_flight.empty() && (up_to < 0 || in_flight.front().apply_after <= up_to)) {
      const int p = in_flight.front().fragment;
      for (int s = 0; s < M; ++s) {
        if (stale[s][p]) continue;  // offline: catches up from the global values
        auto got = cloud->pull(s, p, sites[s].model.params());
        if (!got) return got.err();
        r.bytes_down += *got;
      }
      in_flight.pop_front();
    }
    return ok_status();
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
    const int p = plan.due_after(static_cast<std::uint64_t>(step));
    if (p < 0) continue;
    int joined = 0;
    for (int s = 0; s < M; ++s) {
      if (c.online && !c.online(s, step)) {
        ++r.missed;
        stale[s][p] = true;
        continue;
      }
      if (stale[s][p]) {  // back online: the current global values (fp32), its unsent progress kept
        auto got = cloud->pull(s, p, sites[s].model.params());
        if (!got) return got.err();
        r.bytes_down += *got;
        stale[s][p] = false;
      }
      const std::uint64_t tokens = tokens_per_step * std::uint64_t(step - last_sent[s][p]);
      auto sent = cloud->send(s, p, sites[s].model.params(), tokens);
      if (!sent) return sent.err();
      r.bytes_up += *sent;
      last_sent[s][p] = step;
      ++joined;
    }
    if (joined == 0) continue;  // nobody synced: the fragment waits for the next round
    if (joined < M)
      if (auto closed = cloud->close_late(p); !closed) return closed.err();
    ++r.syncs;
    in_flight.push_back({step + c.overlap, p});
    if (auto s = land(step); !s) return s.err();  // overlap 0: at once
  }
  if (auto s = land(-1); !s) return s.err();  // the last updates land before the end
  auto v = detail::validation_loss(c, d.validation, cloud->theta());
  if (!v) return v.err();
  r.validation_loss = *v;
  return r;
}

}  // namespace loom::sim
