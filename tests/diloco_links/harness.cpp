#include "tests/diloco_links/harness.hpp"

#include "libs/diloco/fragment_plan.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/delta_server.hpp"
#include "services/aggregator/engine.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

namespace loom::test::links {

std::string site_name(int s) { return "site-" + std::to_string(s); }

result<std::unique_ptr<local_aggregator>> local_aggregator::start(const aggregator_options& o) {
  std::unique_ptr<local_aggregator> a(new local_aggregator());
  const layout::paths paths{a->dir_.path()};
  const auto mine = wire::generate_keypair();
  if (auto s = wire::save_keypair(paths.curve_dir(), "aggregator", mine); !s) return s.err();
  if (auto s = files::make_dirs(paths.peers_dir(), 0700); !s) return s.err();
  for (int s = 0; s < o.sites; ++s) {
    a->keys_.push_back(wire::generate_keypair());
    if (auto st = files::write_atomic(paths.peers_dir() + "/" + site_name(s) + ".pub", a->keys_[s].public_z85 + "\n");
        !st)
      return st.err();
  }
  a->engine_ = std::make_shared<aggregator::engine>(
      aggregator::engine_options{a->dir_.path(), "aggregator@links", "cloud", {}, nullptr});
  aggregator::aggregation_spec spec;
  spec.job = a->job_;
  spec.flat_size = o.values;
  spec.fragments = o.fragments;
  spec.sync_every = o.sync_every;
  spec.codec = codec::codec_id::int8;
  spec.rounds.deadline_min = o.deadline_min;
  spec.rounds.deadline_initial = std::chrono::seconds(5);  // the first round: every site joining
  spec.rounds.staleness_bound = o.staleness_bound;
  spec.init_seed = 5;
  const auto now = std::chrono::duration_cast<aggregator::nanos>(clock::now().time_since_epoch());
  // In-process: the terms a grant would carry (the sites, keys/peers), nothing to verify.
  diloco::grant_terms terms{"links", "pretrain", "default", a->dir_.path() + "/jobs/links/pretrain", {}, false,
                            INT64_MAX};
  for (int s = 0; s < o.sites; ++s) terms.sites.push_back(site_name(s));
  if (auto st = a->engine_->start(spec, terms, now); !st) return st.err();
  auto server = aggregator::delta_server::start({a->dir_.path(), mine, o.bind, a->engine_});
  if (!server) return server.err();
  a->server_ = std::move(*server);
  return a;
}

local_aggregator::~local_aggregator() { server_.reset(); }  // its thread uses the engine

trainer::aggregator_address local_aggregator::address() const { return {server_->endpoint(), server_->public_key()}; }

loom::v1::AggregatorStatusReply local_aggregator::status() const {
  loom::v1::AggregatorStatusReply r;
  engine_->describe(&r, "", true);
  return r;
}

std::int64_t local_aggregator::last_round(const std::string& site, int p) const {
  auto a = engine_->pull(job_, site, static_cast<std::uint32_t>(p), UINT64_MAX, false,
                          {site, aggregator::key_source::peer});
  return a ? a->last_round : -1;
}

std::uint64_t local_aggregator::version(int p) const {
  auto a = engine_->pull(job_, site_name(0), static_cast<std::uint32_t>(p), UINT64_MAX, false,
                          {site_name(0), aggregator::key_source::peer});
  return a ? a->version : 0;
}

namespace {

float target(int s, std::size_t i) { return std::sin(0.01f * static_cast<float>(i) * (s + 1)) + 0.5f * s; }

}  // namespace

site_result run_site(const site_options& o, clock::time_point origin) {
  site_result r;
  auto since = [&](clock::time_point t) { return std::chrono::duration<double>(t - origin).count(); };
  trainer::site_sync_options so;
  so.job = o.job;
  so.site = o.site;
  so.keys = o.keys;
  so.locate = [w = o.where] { return result<trainer::aggregator_address>(w); };
  so.timeout = o.timeout;
  so.sync_wait_s = o.sync_wait_s;
  so.join_wait_s = 30;
  so.final_wait_s = 60;
  so.stop = o.stop;
  so.link = o.link;
  auto sync = trainer::site_sync::make(so);
  if (!sync) {
    r.outcome = sync.err();
    return r;
  }
  auto plan = diloco::fragment_plan::flat(o.values, o.fragments, o.sync_every);
  if (!plan) {
    r.outcome = plan.err();
    return r;
  }
  std::vector<float> x(o.values);
  const auto t0 = clock::now();
  if (r.outcome = (*sync)->start(x); !r.outcome) return r;
  std::vector<std::uint64_t> versions(static_cast<std::size_t>(o.fragments));
  std::vector<std::optional<clock::time_point>> due_at(versions.size());
  for (int p = 0; p < o.fragments; ++p) versions[p] = (*sync)->version(p);
  constexpr float alpha = 0.05f;
  for (int step = 1; step <= o.steps; ++step) {
    if (o.stop && o.stop->load()) break;
    const auto s0 = clock::now();
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += alpha * (target(o.index, i) - x[i]);
    std::this_thread::sleep_until(s0 + o.step_time);
    const auto s1 = clock::now();
    r.productive_s += std::chrono::duration<double>(s1 - s0).count();
    if (const int due = plan->due_after(static_cast<std::uint64_t>(step)); due >= 0 && !due_at[due]) due_at[due] = s1;
    if (r.outcome = (*sync)->after_step(static_cast<std::uint64_t>(step), x, 1000); !r.outcome) break;
    const auto s2 = clock::now();
    std::uint64_t lowest = UINT64_MAX;
    for (int p = 0; p < o.fragments; ++p) {
      const auto v = (*sync)->version(p);
      if (v > versions[p] && due_at[p]) {
        r.sync_ms.push_back(std::chrono::duration<double, std::milli>(s2 - *due_at[p]).count());
        due_at[p].reset();
      }
      versions[p] = v;
      lowest = std::min(lowest, v);
    }
    r.versions.emplace_back(since(s2), lowest);
    if (o.on_step) o.on_step(step, since(s2), versions);
  }
  r.train_end_s = since(clock::now());
  const auto f0 = clock::now();
  if (r.outcome) r.outcome = (*sync)->finish(static_cast<std::uint64_t>(o.steps), x, false);
  r.finish_s = std::chrono::duration<double>(clock::now() - f0).count();
  r.wall_s = std::chrono::duration<double>(clock::now() - t0).count();
  r.stats = (*sync)->stats();
  r.stall_s = r.stats.stall_s;
  return r;
}

double continuity(const std::vector<site_result>& r) {
  double productive = 0, wall = 0;
  for (const auto& s : r) {
    productive += s.productive_s;
    wall = std::max(wall, s.train_end_s);
  }
  return r.empty() || wall <= 0 ? 0 : productive / (static_cast<double>(r.size()) * wall);
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(v.size()))) - (q > 0 ? 1 : 0);
  return v[std::min(i, v.size() - 1)];
}

}  // namespace loom::test::links
