#include "services/trainer/diloco_stage.hpp"

#include "libs/atrest/object.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/files/fault.hpp"
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
#include <thread>

namespace loom::trainer {

result<diloco_site> site_of(const assigned_stage& a, const runspec::run_config& cfg) {
  diloco_site d;
  d.aggregation = diloco::aggregation_name(a.job, a.stage);
  const auto sites = diloco::stage_sites(cfg);
  if (a.rank >= sites.size())
    return make_error(errc::invalid_argument, "member " + std::to_string(a.rank) + " of a stage of " +
                                                  std::to_string(sites.size()) + " sites");
  d.site = sites[a.rank];
  loom::v1::AggregationGrant g;
  if (a.aggregation_grant.empty() || !g.ParseFromString(a.aggregation_grant))
    return make_error(errc::invalid_argument, "the assignment of " + a.job + "/" + a.stage +
                                                  " carries no aggregation grant: a diloco stage runs only as the "
                                                  "scheduler placed it (a scheduler from before grants?)");
  if (g.job() != a.job || g.stage() != a.stage || g.spec().job() != d.aggregation)
    return make_error(errc::invalid_argument, "the assignment's aggregation grant is for " + g.job() + "/" +
                                                  g.stage() + ", not " + a.job + "/" + a.stage);
  if (a.rank >= static_cast<std::uint32_t>(g.sites_size()) || g.sites(static_cast<int>(a.rank)) != d.site)
    return make_error(errc::invalid_argument, "the aggregation grant does not place site " + d.site + " at rank " +
                                                  std::to_string(a.rank));
  d.grant = a.aggregation_grant;
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
                                             const diloco_site& where, std::uint32_t rank) {
  auto eps = layout::read_endpoints(env.paths.endpoints());  // fresh: a restarted aggregator may have moved
  const auto* agg = eps ? eps->find("aggregator") : env.eps.find("aggregator");
  if (!agg || agg->rpc.empty())
    return make_error(errc::unavailable, "no aggregator endpoint in " + env.paths.endpoints());
  // An edge site's aggregator is the cloud's (keys/cloud, its bearer token).
  auto key = wire::load_public_key(layout::reach(env.paths, eps ? *eps : env.eps, "aggregator").key_dir, "aggregator");
  if (!key) return key.err();
  loom::v1::StartAggregationRequest req;
  if (!req.mutable_grant()->ParseFromString(where.grant))
    return make_error(errc::invalid_argument, "the aggregation grant does not parse");
  // The spec this member's config says, as the scheduler built it for the
  // grant: train.seed as the run spec has it (localize added the rank), the
  // start the grant names (the job's previous stage; the cloud's path, which
  // an edge site does not hold).
  runspec::run_config base = cfg;
  base.seed -= rank;
  diloco::stage_spec(base, where.aggregation, req.grant().spec().init_snapshot(), req.mutable_spec());
  wire::client cli(*env.ctx, agg->rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(2000), 0});
  auto rep = wire::call_typed<loom::v1::StartAggregationReply>(cli, req, runtime::token_for(env, "aggregator"));
  if (!rep) return make_error(rep.code(), "StartAggregation " + where.aggregation + " at " + agg->rpc + ": " +
                                              rep.err().message);
  if (rep->starting())
    return make_error(errc::unavailable, "aggregation " + where.aggregation + " is being made at " + agg->rpc);
  return aggregator_address{rep->delta_endpoint(), rep->public_key()};
}

result<std::unique_ptr<site_sync>> make_site_sync(runtime::service_env& env, const runspec::run_config& cfg,
                                                  const assigned_stage& a, const std::atomic<bool>* stop) {
  auto placed = site_of(a, cfg);
  if (!placed) return placed.err();
  const diloco_site where = *placed;
  // An edge site: its trainer key, enrolled with the cloud, speaks for it
  // (the delta server admits keys/sites/<site>.trainer.pub as that site);
  // this deployment's sites have keys of their own (keys/diloco).
  result<wire::curve_keypair> keys = env.keys;
  if (cfg.diloco.site_names.empty()) keys = site_identity(env.paths, where.site);
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
  o.locate = [&env, &cfg, where, rank = a.rank] { return start_aggregation(env, cfg, where, rank); };
  o.sync_wait_s = cfg.diloco.sync_wait_s;  // now: when a version counts as merged late
  // A site the stage can do without (diloco.min_sites below the sites; not
  // member 0, which ends the aggregation) waits to join for as long as the
  // stage runs: giving up would fail a stage that may succeed without it.
  const auto& d = cfg.diloco;
  if (a.rank > 0 && d.min_sites > 0 && d.min_sites < d.sites) o.join_wait_s = 365.0 * 24 * 3600;
  o.stop = stop;
  o.log = [](const std::string& line) {
    std::fprintf(stderr, "trainer: %s\n", line.c_str());
    std::fflush(stderr);
  };
  return site_sync::make(std::move(o));
}

result<stage_end> end_aggregation(runtime::service_env& env, const assigned_stage& a, const std::string& snapshot,
                                  bool end_only) {
  loom::v1::ExportGlobalRequest req;
  if (!req.mutable_grant()->ParseFromString(a.aggregation_grant))
    return make_error(errc::invalid_argument, "the aggregation grant does not parse");
  req.set_job(req.grant().spec().job());
  req.set_end_only(end_only);
  if (!end_only) {
    const std::string base = snapshot.substr(snapshot.find_last_of('/') + 1);
    const auto step = ckpt::parse_step_dir(base);
    auto state = atrest::read_object(snapshot + "/trainer_state.json");  // sealed at rest: the plaintext
    if (!step || !state) return make_error(errc::not_found, snapshot + " is not a snapshot with a trainer_state.json");
    req.set_step(*step);
    req.set_trainer_state(*state);
  }
  auto eps = layout::read_endpoints(env.paths.endpoints());
  const layout::endpoints& e = eps ? *eps : env.eps;
  const auto* agg = e.find("aggregator");
  auto key = wire::load_public_key(layout::reach(env.paths, e, "aggregator").key_dir, "aggregator");
  if (!agg || agg->rpc.empty() || !key) return make_error(errc::unavailable, "no aggregator endpoint or key");
  // Retried through a short outage: the stage's end waits on it.
  wire::client cli(*env.ctx, agg->rpc, *key, env.keys, wire::client_options{std::chrono::milliseconds(10000), 2});
  auto rep = wire::call_typed<loom::v1::ExportGlobalReply>(cli, req, runtime::token_for(env, "aggregator"));
  // A full disk or a failed fsync at the aggregator's host passes: the export
  // is asked again, as a snapshot write is (found by the chaos harness across
  // hosts: one failed fsync at the cloud failed a cross-site job at its end).
  for (auto wait = std::chrono::milliseconds(500); !rep && files::storage_fault(rep.err()) && wait <= std::chrono::seconds(4);
       wait *= 2) {
    std::this_thread::sleep_for(wait);
    rep = wire::call_typed<loom::v1::ExportGlobalReply>(cli, req, runtime::token_for(env, "aggregator"));
  }
  if (!rep) return make_error(rep.code(), "ExportGlobal at " + agg->rpc + ": " + rep.err().message);
  stage_end out;
  out.snapshot = end_only ? snapshot : rep->snapshot();
  out.contributed.assign(rep->contributed().begin(), rep->contributed().end());
  out.missing.assign(rep->missing().begin(), rep->missing().end());
  return out;
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
