#include "services/trainer/diloco_stage.hpp"

#include "libs/ckpt/snapshot.hpp"
#include "libs/files/files.hpp"
#include "libs/metrics/metrics.hpp"
#include "libs/runtime/service.hpp"
#include "libs/wire/client.hpp"
#include "libs/wire/envelope_pb.hpp"
#include "libs/wire/link_spec.hpp"
#include "loom/v1/aggregator.pb.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <map>

namespace loom::trainer {

diloco_site site_of(const assigned_stage& a) {
  diloco_site d;
  d.site = "site-" + std::to_string(a.rank);
  std::string name = a.job + "." + a.stage;
  for (char& ch : name)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '.' && ch != '_' && ch != '-') ch = '-';
  d.aggregation = name.substr(0, 64);
  d.init_snapshot = a.out_dir + "/checkpoints/" + ckpt::step_dir_name(0);
  return d;
}

void localize(runspec::run_config& cfg, const assigned_stage& a) {
  // Named edge sites each write under their own data dir (worker: out_dir is already the site's).
  if (a.rank > 0 && cfg.diloco.site_names.empty()) cfg.out_dir = a.out_dir + "/site-" + std::to_string(a.rank);
  if (a.rank < cfg.diloco.datasets.size()) cfg.dataset = cfg.diloco.datasets[a.rank];
  cfg.seed += a.rank;
}

result<wire::curve_keypair> site_identity(const layout::paths& paths, const std::string& site) {
  const std::string dir = paths.state("trainer") + "/sites";
  auto kp = wire::load_keypair(dir, site);
  if (!kp && kp.code() == errc::not_found) {
    if (auto st = wire::save_keypair(dir, site, wire::generate_keypair()); !st) return st.err();
    kp = wire::load_keypair(dir, site);
  }
  if (!kp) return kp.err();
  // Not keys/peers: those the dataset sync server trusts too.
  const std::string pub = paths.diloco_sites_dir() + "/" + site + ".pub";
  auto published = files::read_file(pub);
  if (!published || *published != kp->public_z85 + "\n") {
    if (auto st = files::make_dirs(paths.diloco_sites_dir(), 0700); !st) return st.err();
    if (auto st = files::write_atomic(pub, kp->public_z85 + "\n", 0644); !st) return st.err();
  }
  return kp;
}

result<aggregator_address> start_aggregation(runtime::service_env& env, const runspec::run_config& cfg,
                                             const diloco_site& where) {
  auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: a restarted aggregator may have moved
  const auto* agg = eps ? eps->find("aggregator") : env.eps.find("aggregator");
  if (!agg || agg->rpc.empty())
    return make_error(errc::unavailable, "no aggregator endpoint in " + env.paths.endpoints());
  // An edge site's aggregator is the cloud's (keys/cloud, its bearer token).
  auto key = wire::load_public_key(layout::reach(env.paths, eps ? *eps : env.eps, "aggregator").key_dir, "aggregator");
  if (!key) return key.err();
  loom::v1::StartAggregationRequest req;
  auto* s = req.mutable_spec();
  s->set_job(where.aggregation);
  s->set_gpt2_layers(static_cast<std::uint32_t>(cfg.model.layers));
  s->set_gpt2_heads(static_cast<std::uint32_t>(cfg.model.heads));
  s->set_gpt2_channels(static_cast<std::uint32_t>(cfg.model.channels));
  s->set_gpt2_max_seq_len(static_cast<std::uint32_t>(cfg.model.max_seq_len));
  s->set_gpt2_vocab(static_cast<std::uint32_t>(cfg.model.vocab));
  s->set_gpt2_padded_vocab(static_cast<std::uint32_t>(cfg.model.padded_vocab));
  s->set_fragments(cfg.diloco.fragments);
  s->set_sync_every(cfg.diloco.inner_steps);
  s->set_codec(cfg.diloco.codec);
  s->set_quorum_fraction(cfg.diloco.quorum);
  s->set_staleness_bound(cfg.diloco.staleness);
  s->set_deadline_min_ms(static_cast<std::uint64_t>(cfg.diloco.deadline_min_s * 1000));
  s->set_outer_lr(cfg.diloco.outer_lr);
  s->set_outer_momentum(cfg.diloco.outer_momentum);
  // Edge sites: no site's snapshot is readable at the cloud; every member
  // names the same seed and the aggregator draws GPT-2's init from it.
  if (where.init_seed != 0) s->set_init_seed(where.init_seed);
  else s->set_init_snapshot(where.init_snapshot);
  wire::client cli(*env.ctx, agg->rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(2000), 0});
  auto rep = wire::call_typed<loom::v1::StartAggregationReply>(cli, req, runtime::token_for(env, "aggregator"));
  if (!rep) return make_error(rep.code(), "StartAggregation " + where.aggregation + " at " + agg->rpc + ": " +
                                              rep.err().message);
  return aggregator_address{rep->delta_endpoint(), rep->public_key()};
}

result<std::unique_ptr<site_sync>> make_site_sync(runtime::service_env& env, const runspec::run_config& cfg,
                                                  const assigned_stage& a, const std::atomic<bool>* stop) {
  diloco_site where = site_of(a);
  result<wire::curve_keypair> keys = env.keys;
  if (a.rank < cfg.diloco.site_names.size()) {
    // An edge site: its trainer key, enrolled with the cloud, speaks for it
    // (the delta server admits keys/sites/<site>.trainer.pub as <site>).
    where.site = cfg.diloco.site_names[a.rank];
    where.init_seed = std::max<std::uint64_t>(1, cfg.seed - a.rank);  // localize added the rank
  } else {
    keys = site_identity(env.paths, where.site);
  }
  if (!keys) return make_error(keys.code(), "the identity of " + where.site + ": " + keys.err().message);
  auto codec = codec::codec_from_string(cfg.diloco.codec);
  if (!codec) return make_error(errc::invalid_argument, "diloco.codec " + cfg.diloco.codec + " is not a codec");
  // Checked at start-up (main.cpp); read again here, so a stage gets the link its site is given.
  auto link = wire::link_config_for_site([](const char* k) { return std::getenv(k); }, where.site);
  if (!link) return link.err();
  if (*link && (*link)->shapes()) {
    const std::string own = wire::link_shape_env_for(where.site);
    const char* v = std::getenv(own.c_str());
    std::fprintf(stderr, "trainer: diloco %s: link to the aggregator shaped by %s\n", where.site.c_str(),
                 v && *v ? own.c_str() : "LOOM_LINK_SHAPE (its seed mixed with the site's name)");
  }
  site_sync_options o;
  o.link = *link;
  o.job = where.aggregation;
  o.site = where.site;
  o.keys = *keys;
  o.codec = *codec;
  o.locate = [&env, &cfg, where] { return start_aggregation(env, cfg, where); };
  o.sync_wait_s = cfg.diloco.sync_wait_s;  // now: when a version counts as merged late
  o.stop = stop;
  o.log = [](const std::string& line) {
    std::fprintf(stderr, "trainer: %s\n", line.c_str());
    std::fflush(stderr);
  };
  return site_sync::make(std::move(o));
}

result<std::string> export_global(runtime::service_env& env, const assigned_stage& a,
                                  const std::string& cloud_stage_dir, const std::string& snapshot) {
  const std::string base = snapshot.substr(snapshot.find_last_of('/') + 1);
  const auto step = ckpt::parse_step_dir(base);
  auto state = files::read_file(snapshot + "/trainer_state.json");
  if (!step || !state) return make_error(errc::not_found, snapshot + " is not a snapshot with a trainer_state.json");
  auto eps = layout::read_endpoints(env.paths.endpoints());
  const layout::endpoints& e = eps ? *eps : env.eps;
  const auto* agg = e.find("aggregator");
  auto key = wire::load_public_key(layout::reach(env.paths, e, "aggregator").key_dir, "aggregator");
  if (!agg || agg->rpc.empty() || !key) return make_error(errc::unavailable, "no aggregator endpoint or key");
  loom::v1::ExportGlobalRequest req;
  req.set_job(site_of(a).aggregation);
  req.set_stage_dir(cloud_stage_dir);
  req.set_step(*step);
  req.set_trainer_state(*state);
  // Retried through a short outage: the stage's end waits on it.
  wire::client cli(*env.ctx, agg->rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(10000), 2});
  auto rep = wire::call_typed<loom::v1::ExportGlobalReply>(cli, req, runtime::token_for(env, "aggregator"));
  if (!rep) return make_error(rep.code(), "ExportGlobal at " + agg->rpc + ": " + rep.err().message);
  return rep->snapshot();
}

void publish(metrics::service_metrics* m, const site_sync& site) {
  if (!m) return;
  const auto s = site.stats();
  const std::map<std::string, std::string> l{{"job", site.job()}, {"site", site.site()}};
  m->set("diloco_payload_bytes_sent", l, double(s.wire.payload_bytes_sent));
  m->set("diloco_payload_bytes_received", l, double(s.wire.payload_bytes_received));
  m->set("diloco_deltas_sent", l, double(s.syncs));
  m->set("diloco_deltas_late", l, double(s.late));
  m->set("diloco_deltas_deferred", l, double(s.deferred));
  m->set("diloco_deltas_dropped", l, double(s.dropped));
  m->set("diloco_rounds_joined", l, double(s.rounds_joined));
  m->set("diloco_unreachable", l, double(s.unreachable));
  m->set("diloco_stall_seconds", l, s.stall_s);
  m->set("diloco_compression_error", l, s.compression_error);
  m->set("diloco_round", l, double(site.version(0)));
}

site_report report_of(const site_sync& site) {
  const auto s = site.stats();
  site_report r;
  r.site = site.site();
  r.bytes_sent = s.wire.payload_bytes_sent;
  r.bytes_received = s.wire.payload_bytes_received;
  r.stall_s = s.stall_s;
  r.round = site.version(0);
  r.deltas_sent = s.syncs;
  r.deferred = s.deferred;
  r.late = s.late;
  r.dropped = s.dropped;
  r.up_bytes_per_s = s.up_bytes_per_s;
  return r;
}

std::string describe(const site_sync_stats& s) {
  std::vector<double> ms = s.sync_ms;
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, std::size_t(q * double(ms.size())))]; };
  char buf[768];
  std::snprintf(buf, sizeof buf,
                "diloco: %llu deltas sent (%llu re-sent, %llu deferred, %llu merged late), %llu payload bytes up, "
                "%llu down, %llu updates and %llu parameter pulls applied, sync p50 %.1f ms p99 %.1f ms over %zu, "
                "%.3f s stalled, %.2f s in finish, %llu late, %llu dropped, %llu rounds joined, "
                "codec error %.3g, aggregator unreachable %llu times",
                static_cast<unsigned long long>(s.syncs), static_cast<unsigned long long>(s.wire.resent),
                static_cast<unsigned long long>(s.deferred), static_cast<unsigned long long>(s.late_merges),
                static_cast<unsigned long long>(s.wire.payload_bytes_sent),
                static_cast<unsigned long long>(s.wire.payload_bytes_received),
                static_cast<unsigned long long>(s.wire.updates_applied),
                static_cast<unsigned long long>(s.wire.params_applied), at(0.5), at(0.99), ms.size(), s.stall_s,
                s.finish_s, static_cast<unsigned long long>(s.late), static_cast<unsigned long long>(s.dropped),
                static_cast<unsigned long long>(s.rounds_joined), s.compression_error,
                static_cast<unsigned long long>(s.unreachable));
  return buf;
}

}  // namespace loom::trainer
