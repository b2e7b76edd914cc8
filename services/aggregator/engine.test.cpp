// engine: aggregations exist only by the scheduler's grant (issue 24): who
// may start, join, send and export, the limits, a true reply, the bounds on
// deltas, retirement and what a restart reloads; and a job started from a
// signed snapshot (the trainer's layout) gets exactly its parameters.
#include "services/aggregator/engine.hpp"
#include "libs/metrics/metrics.hpp"

#include "libs/audit/record.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/diloco/grant/grant.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/layout/layout.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/job_store.hpp"
#include "services/aggregator/wire.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace loom;
using namespace loom::aggregator;
namespace fs = std::filesystem;

namespace {

model::gpt2_config tiny() { return {2, 2, 8, 8, 16, 16}; }

// Publishes <root>/step-000003 holding model.safetensors with `params` (the
// trainer's layout), signed with `key`.
void publish(const std::string& root, const std::vector<float>& params, const std::string& key) {
  const auto cfg = tiny();
  ckpt::snapshot_writer w;
  REQUIRE(w.begin(root, 3).ok());
  REQUIRE(ckpt::write_safetensors(w.dir() + "/model.safetensors", ckpt::gpt2_tensors(cfg, params)).ok());
  REQUIRE(w.add_existing("model.safetensors").ok());
  REQUIRE(w.publish(key, 0).ok());
}

aggregation_spec from(const std::string& job, const std::string& snapshot) {
  aggregation_spec s;
  s.job = job;
  s.gpt2 = tiny();
  s.fragments = 2;
  s.sync_every = 4;
  s.codec = codec::codec_id::fp32;
  s.init_snapshot = snapshot;
  return s;
}

diloco::grant_terms cloud_terms(std::vector<std::string> sites = {"site-0"}) {
  return {"job-1", "pretrain", "default", "/nowhere/jobs/job-1/pretrain", std::move(sites), false, INT64_MAX};
}

// A deployment's data dir with its token and checkpoint keys, an engine over
// it with a clock the test moves, and grants signed as the scheduler does.
struct deployment {
  files::temp_dir dir;
  layout::paths paths{dir.path()};
  std::string token_key, ckpt_key;
  std::int64_t clock = 1'700'000'000;
  std::vector<audit::record> audited;
  std::mutex audit_mu;

  deployment() {
    REQUIRE(files::make_dirs(dir.path() + "/keys").ok());
    REQUIRE(auth::create_token_key(paths.token_key()).ok());
    REQUIRE(auth::create_token_key(paths.checkpoint_key()).ok());
    token_key = auth::load_token_key(paths.token_key()).value();
    ckpt_key = auth::load_token_key(paths.checkpoint_key()).value();
  }
  engine_options options() {
    engine_options o{dir.path(), "aggregator@test", "cloud",
                     [this](audit::record r) {
                       std::lock_guard l(audit_mu);
                       audited.push_back(std::move(r));
                     },
                     nullptr};
    o.token_key = token_key;
    o.unix_now = [this] { return clock; };
    return o;
  }
  std::string stage_dir(const std::string& job, const std::string& stage = "pretrain") const {
    return dir.path() + "/jobs/" + job + "/" + stage;
  }
  // The scheduler's grant for stage `stage` of `job`, with `spec` (its job named for them).
  v1::AggregationGrant grant(const std::string& job, const std::vector<std::string>& sites, bool edge,
                             v1::AggregationSpec spec, const std::string& tenant = "default",
                             const std::string& stage = "pretrain", std::int64_t ttl = 3600) {
    v1::AggregationGrant g;
    g.set_job(job);
    g.set_stage(stage);
    g.set_tenant(tenant);
    g.set_stage_dir(stage_dir(job, stage));
    for (const auto& s : sites) g.add_sites(s);
    g.set_edge_sites(edge);
    spec.set_job(diloco::aggregation_name(job, stage));
    *g.mutable_spec() = spec;
    g.set_expires_unix(clock + ttl);
    diloco::sign_grant(&g, token_key);
    return g;
  }
  std::size_t count(const std::string& action) {
    std::lock_guard l(audit_mu);
    return std::count_if(audited.begin(), audited.end(), [&](const audit::record& r) { return r.action == action; });
  }
};

v1::AggregationSpec flat_spec(std::uint64_t values = 64, std::uint64_t max_tokens = 1000) {
  v1::AggregationSpec s;
  s.set_flat_size(values);
  s.set_fragments(2);
  s.set_sync_every(2);
  s.set_codec("fp32");
  s.set_init_seed(3);
  s.set_max_delta_tokens(max_tokens);
  return s;
}

v1::AggregationSpec gpt2_spec(std::uint32_t min_sites = 0) {
  v1::AggregationSpec s;
  const auto c = tiny();
  s.set_gpt2_layers(c.layers);
  s.set_gpt2_heads(c.heads);
  s.set_gpt2_channels(c.channels);
  s.set_gpt2_max_seq_len(c.max_seq_len);
  s.set_gpt2_vocab(c.vocab);
  s.set_gpt2_padded_vocab(c.padded_vocab);
  s.set_fragments(1);
  s.set_sync_every(2);
  s.set_codec("fp32");
  s.set_init_seed(5);
  s.set_max_delta_tokens(1000);
  s.set_min_sites(min_sites);
  return s;
}

aggregation_spec domain(const v1::AggregationGrant& g) { return from_wire(g.spec()).value(); }

// A delta of fragment p: `v` in fp32, for `round`, as `site` says.
struct frame {
  delta_header h;
  std::string payload;
};
frame delta(const std::string& job, const std::string& site, std::uint32_t p, const std::vector<float>& v,
            std::uint64_t tokens = 100, std::uint64_t round = 0) {
  frame f;
  auto q = codec::encode(codec::codec_id::fp32, v).value();
  f.payload.assign(reinterpret_cast<const char*>(q.data()), q.size());
  f.h.job = job;
  f.h.meta = {site, round, p, round, v.size(), tokens};
  f.h.codec = "fp32";
  f.h.payload_bytes = f.payload.size();
  f.h.payload_sha256 = std::string(crypto::as_view(crypto::sha256(f.payload)));
  return f;
}

std::string refused(const std::variant<delta_outcome, refusal>& out) {
  const auto* r = std::get_if<refusal>(&out);
  return r ? r->reason : "";
}

const site_key north{"north", key_source::enrolled}, south{"south", key_source::enrolled};

std::vector<std::string> temp_dirs_under(const std::string& root) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().rfind(".tmp-", 0) == 0) out.push_back(it->path().string());
  return out;
}

}  // namespace

TEST_CASE("an aggregation starts from a signed snapshot's parameters and refuses an altered or outside one") {
  files::temp_dir dir;
  const layout::paths paths{dir.path()};
  REQUIRE(files::make_dirs(dir.path() + "/keys").ok());
  REQUIRE(auth::create_token_key(paths.checkpoint_key()).ok());
  const std::string key = auth::load_token_key(paths.checkpoint_key()).value();
  const std::size_t total = model::make_param_layout(tiny()).total;
  std::vector<float> params(total);
  for (std::size_t i = 0; i < total; ++i) params[i] = 0.001f * static_cast<float>(i);
  publish(dir.path() + "/snaps", params, key);

  engine e({dir.path(), "aggregator@test", "local", {}, nullptr});
  auto started = e.start(from("from-snap", "snaps"), cloud_terms({"a"}), nanos(0));
  REQUIRE_MESSAGE(started.ok(), started.err().message);
  const site_key a{"a", key_source::peer};
  REQUIRE(e.join("from-snap", "a", a).ok());
  const auto plan = make_plan(from("from-snap", "snaps")).value();
  for (std::uint32_t p = 0; p < 2; ++p) {
    auto got = e.pull("from-snap", "a", p, 0, true, a).value();
    std::vector<float> values(got.header.elements), want(plan.size(static_cast<int>(p)));
    REQUIRE(codec::decode({reinterpret_cast<const std::byte*>(got.payload->data()), got.payload->size()}, values).ok());
    plan.gather(static_cast<int>(p), params, want);
    CHECK(values == want);
  }

  const std::string model = dir.path() + "/snaps/step-000003/model.safetensors";
  std::string bytes = *files::read_file(model);
  bytes[bytes.size() - 3] ^= 0x01;
  REQUIRE(files::write_atomic(model, bytes).ok());
  auto altered = e.start(from("altered", "snaps"), cloud_terms(), nanos(0));
  REQUIRE_FALSE(altered.ok());
  CHECK(altered.err().message.find("init_snapshot snaps") != std::string::npos);
  auto outside = e.start(from("outside", "/usr/share"), cloud_terms(), nanos(0));
  CHECK(outside.code() == errc::permission_denied);
  CHECK_FALSE(fs::exists(dir.path() + "/aggregator/altered"));
}

TEST_CASE("StartAggregation needs the scheduler's grant, from a placed site's trainer, for exactly the granted spec") {
  deployment d;
  engine e(d.options());
  const auto g = d.grant("job-1", {"north", "south"}, true, flat_spec());
  const auto spec = domain(g);
  // No grant, another deployment's, an expired one.
  auto none = e.start(spec, v1::AggregationGrant{}, "site:north:trainer", nanos(0));
  CHECK(none.code() == errc::permission_denied);
  auto forged = g;
  diloco::sign_grant(&forged, std::string(32, 'x'));
  CHECK(e.start(spec, forged, "site:north:trainer", nanos(0)).code() == errc::permission_denied);
  d.clock += 3600;
  auto late = e.start(spec, g, "site:north:trainer", nanos(0));
  CHECK(late.code() == errc::permission_denied);
  CHECK(late.err().message.find("expired") != std::string::npos);
  d.clock -= 3600;
  // Only the placed sites' trainer keys: not the client key (an operator), not another site's, not a site's other service.
  for (const char* peer : {"client", "site:east:trainer", "site:north:ingest", "trainer", "unenrolled", ""}) {
    auto r = e.start(spec, g, peer, nanos(0));
    CHECK_MESSAGE(r.code() == errc::permission_denied, peer);
  }
  // The granted spec and no other.
  auto other = spec;
  other.fragments = 1;
  auto differs = e.start(other, g, "site:north:trainer", nanos(0));
  CHECK(differs.code() == errc::permission_denied);
  CHECK(differs.err().message.find("fragments") != std::string::npos);
  CHECK(d.count("aggregation.start") == 0);
  CHECK_FALSE(fs::exists(d.dir.path() + "/aggregator/" + spec.job));
  auto ok = e.start(spec, g, "site:south:trainer", nanos(0));
  REQUIRE_MESSAGE(ok.ok(), ok.err().to_string());
  CHECK_FALSE(ok->starting);
  CHECK(ok->versions.size() == 2);
  auto again = e.start(spec, g, "site:north:trainer", nanos(0));
  REQUIRE(again.ok());
  CHECK(again->resumed);

  // A stage of this deployment's own trainers: the trainer key, not a site's.
  const auto own = d.grant("job-2", {"site-0", "site-1"}, false, flat_spec());
  CHECK(e.start(domain(own), own, "site:north:trainer", nanos(0)).code() == errc::permission_denied);
  CHECK(e.start(domain(own), own, "trainer", nanos(0)).ok());

  // Its start only from the job's own lineage: a snapshot outside the job's directory is refused.
  auto theirs = gpt2_spec();
  theirs.set_init_seed(0);
  theirs.set_init_snapshot(d.dir.path() + "/jobs/job-9/pretrain/checkpoints");
  REQUIRE(files::make_dirs(d.dir.path() + "/jobs/job-9/pretrain/checkpoints").ok());
  const auto foreign = d.grant("job-3", {"north"}, true, theirs);
  auto lineage = e.start(domain(foreign), foreign, "site:north:trainer", nanos(0));
  CHECK(lineage.code() == errc::permission_denied);
  CHECK(lineage.err().message.find("previous stage") != std::string::npos);
}

TEST_CASE("a start that hits a failed fsync is answered unavailable, leaves no job or temp file, and the next start makes it") {
  deployment d;
  engine e(d.options());
  const auto g = d.grant("job-1", {"north", "south"}, true, flat_spec());
  const auto spec = domain(g);
  const std::string faults = d.dir.path() + "/faults";
  REQUIRE(files::make_dirs(faults).ok());
  std::ofstream(faults + "/fsync").put('1');
  ::setenv("LOOM_FAULTS_DIR", faults.c_str(), 1);
  auto failed = e.start(spec, g, "site:north:trainer", nanos(0));
  ::unsetenv("LOOM_FAULTS_DIR");
  // The trainer asks again on unavailable (site_sync::start); a refusal would fail its stage.
  REQUIRE_FALSE(failed.ok());
  CHECK(failed.code() == errc::unavailable);
  CHECK_MESSAGE(failed.err().message.find("storage fault") != std::string::npos, failed.err().message);
  CHECK_MESSAGE(failed.err().message.find("Input/output error") != std::string::npos, failed.err().message);
  CHECK(d.count("aggregation.start") == 0);
  CHECK(d.count("aggregation.start_failed") == 1);
  std::vector<std::string> temps;
  std::error_code ec;
  for (fs::recursive_directory_iterator it(d.dir.path() + "/aggregator", ec), end; !ec && it != end; it.increment(ec))
    if (it->path().filename().string().find(".tmp.") != std::string::npos) temps.push_back(it->path().string());
  CHECK(temps.empty());
  // The fault passed: the same grant makes the job, as new.
  auto ok = e.start(spec, g, "site:north:trainer", nanos(0));
  REQUIRE_MESSAGE(ok.ok(), ok.err().to_string());
  CHECK_FALSE(ok->resumed);
  CHECK(ok->versions.size() == 2);
  CHECK(d.count("aggregation.start") == 1);
}

TEST_CASE("a start past the limits is refused naming the limit: values, fragments, live aggregations, their values together") {
  deployment d;
  auto o = d.options();
  o.limits.max_live = 2;
  o.limits.max_total_values = 3000;
  engine e(std::move(o));
  auto spec = domain(d.grant("job-1", {"site-0"}, false, flat_spec(1000)));
  auto huge = spec;
  huge.flat_size = std::uint64_t{1} << 40;  // once a bad_alloc
  auto r = e.start(huge, cloud_terms(), nanos(0));
  CHECK(r.code() == errc::resource_exhausted);
  CHECK(r.err().message.find("the largest model template") != std::string::npos);
  huge.flat_size = default_limits().max_values + 1;
  CHECK(e.start(huge, cloud_terms(), nanos(0)).code() == errc::resource_exhausted);
  auto frags = spec;
  frags.fragments = 300;
  frags.sync_every = 1000;  // H >= P
  CHECK(e.start(frags, cloud_terms(), nanos(0)).err().message.find("fragments") != std::string::npos);
  auto a = spec, b = spec, c = spec;
  a.job = "a";
  b.job = "b";
  c.job = "c";
  REQUIRE(e.start(a, cloud_terms(), nanos(0)).ok());
  auto big = b;
  big.flat_size = 2500;  // 1000 + 2500 > 3000
  CHECK(e.start(big, cloud_terms(), nanos(0)).err().message.find("values") != std::string::npos);
  REQUIRE(e.start(b, cloud_terms(), nanos(0)).ok());
  auto third = e.start(c, cloud_terms(), nanos(0));
  CHECK(third.code() == errc::resource_exhausted);
  CHECK(third.err().message.find("2 aggregations") != std::string::npos);
  CHECK(d.count("aggregation.start_refused") >= 5);
}

TEST_CASE("a job that takes longer to make than the wait is answered `starting`, truly, and is live once made") {
  deployment d;
  auto o = d.options();
  o.start_wait = std::chrono::milliseconds(0);
  engine e(std::move(o));
  auto spec = domain(d.grant("job-1", {"site-0"}, false, flat_spec(4'000'000)));
  auto first = e.start(spec, cloud_terms(), nanos(0));
  REQUIRE(first.ok());
  CHECK(first->starting);
  CHECK(first->versions.empty());
  // Meanwhile the delta socket says so, and asking again is fine.
  CHECK(e.join(spec.job, "site-0", {"site-0", key_source::diloco}).code() == errc::unavailable);
  bool live = false;
  for (int i = 0; i < 600 && !live; ++i) {
    auto again = e.start(spec, cloud_terms(), nanos(0));
    REQUIRE(again.ok());
    live = !again->starting;
    if (live) CHECK(again->versions.size() == 2);
    else std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(live);
  CHECK(fs::exists(state_path(d.dir.path(), spec.job)));
}

TEST_CASE("only the granted sites join, pull and send, a delta past the token or norm bound is refused, counted and audited") {
  deployment d;
  engine e(d.options());
  const auto g = d.grant("job-1", {"north", "south"}, true, flat_spec(64, 1000));
  const auto spec = domain(g);
  REQUIRE(e.start(spec, g, "site:north:trainer", nanos(0)).ok());
  const std::string job = spec.job;
  // Not placed: another enrolled site; this deployment's "north" (keys/diloco); a key for another name.
  CHECK(e.join(job, "east", {"east", key_source::enrolled}).code() == errc::permission_denied);
  CHECK(e.join(job, "north", {"north", key_source::diloco}).code() == errc::permission_denied);
  CHECK(e.join(job, "north", south).code() == errc::permission_denied);
  CHECK(e.pull(job, "east", 0, 0, true, {"east", key_source::enrolled}).code() == errc::permission_denied);
  v1::RoundStatusList list;
  CHECK(e.round_status(job, {"east", key_source::enrolled}, &list).code() == errc::permission_denied);
  CHECK(d.count("aggregation.join_refused") == 3);
  CHECK(d.count("aggregation.pull_refused") == 1);
  CHECK(d.count("aggregation.status_refused") == 1);
  REQUIRE(e.join(job, "north", north).ok());
  REQUIRE(e.join(job, "south", south).ok());
  CHECK(e.pull(job, "north", 0, 0, true, north).ok());
  CHECK(e.round_status(job, north, &list).ok());

  const std::vector<float> small(32, 0.01f);
  CHECK(refused(e.submit(delta(job, "east", 0, small).h, delta(job, "east", 0, small).payload,
                         {"east", key_source::enrolled}, nanos(0))) == "not_granted");
  auto many = delta(job, "north", 0, small, 1001);
  CHECK(refused(e.submit(many.h, many.payload, north, nanos(0))) == "too_many_tokens");
  auto all = delta(job, "north", 0, small, UINT64_MAX);
  CHECK(refused(e.submit(all.h, all.payload, north, nanos(0))) == "too_many_tokens");
  auto blown = delta(job, "north", 0, std::vector<float>(32, 1e20f));
  CHECK(refused(e.submit(blown.h, blown.payload, north, nanos(0))) == "norm_bound");
  auto good = delta(job, "north", 0, small);
  CHECK(refused(e.submit(good.h, good.payload, north, nanos(0))).empty());

  v1::AggregatorStatusReply st;
  e.describe(&st, "default", false);
  REQUIRE(st.jobs_size() == 1);
  const auto& rejected = st.jobs(0).fragments(0).rejected_total();
  CHECK(rejected.at("not_granted") == 1);
  CHECK(rejected.at("too_many_tokens") == 2);
  CHECK(rejected.at("norm_bound") == 1);
  std::lock_guard l(d.audit_mu);
  int norm_audited = 0;
  for (const auto& r : d.audited)
    if (r.action == "aggregation.delta_rejected" && r.reason.rfind("norm_bound: ", 0) == 0) {
      ++norm_audited;
      CHECK(r.outcome == audit::decision::deny);
      CHECK(r.payload.find("key=sites/north") != std::string::npos);
    }
  CHECK(norm_audited == 1);
}

TEST_CASE("the export writes only into the granted stage dir, needs every site's contribution, retires the job and leaves no temp dir") {
  deployment d;
  engine e(d.options());
  const auto g = d.grant("job-1", {"north", "south"}, true, gpt2_spec());
  const auto spec = domain(g);
  REQUIRE(e.start(spec, g, "site:north:trainer", nanos(0)).ok());
  REQUIRE(e.join(spec.job, "north", north).ok());
  const std::size_t n = model::make_param_layout(tiny()).total;
  auto f = delta(spec.job, "north", 0, std::vector<float>(n, 0.001f));
  REQUIRE(refused(e.submit(f.h, f.payload, north, nanos(0))).empty());

  v1::ExportGlobalRequest req;
  *req.mutable_grant() = g;
  req.set_step(16);
  req.set_trainer_state("{\"step\": 16}");
  // Into another job's stage dir, or by a key not placed: refused, nothing written.
  auto elsewhere = req;
  elsewhere.set_stage_dir(d.stage_dir("job-2"));
  CHECK(e.export_global(elsewhere, "site:north:trainer").code() == errc::permission_denied);
  CHECK(e.export_global(req, "client").code() == errc::permission_denied);
  CHECK(e.export_global(req, "site:east:trainer").code() == errc::permission_denied);
  CHECK_FALSE(fs::exists(d.stage_dir("job-2")));
  // South never sent a delta: refused naming it, and the job retires with it (its stage fails).
  auto missing = e.export_global(req, "site:north:trainer");
  REQUIRE(missing.code() == errc::conflict);
  CHECK(missing.err().message.find("site south never contributed") != std::string::npos);
  CHECK_FALSE(fs::exists(d.stage_dir("job-1") + "/checkpoints"));
  CHECK_FALSE(fs::exists(state_path(d.dir.path(), spec.job)));
  CHECK(fs::exists(retired_path(d.dir.path(), spec.job)));
  // Retired: the grant cannot start it again, the sites get a clear answer.
  auto restart = e.start(spec, g, "site:north:trainer", nanos(0));
  CHECK(restart.code() == errc::conflict);
  CHECK(restart.err().message.find("retired") != std::string::npos);
  CHECK(e.join(spec.job, "north", north).err().message.find("has ended (missing contributions: south)") !=
        std::string::npos);

  // diloco.min_sites = 1: the export goes through and says who contributed.
  const auto g2 = d.grant("job-3", {"north", "south"}, true, gpt2_spec(1));
  const auto spec2 = domain(g2);
  REQUIRE(e.start(spec2, g2, "site:south:trainer", nanos(0)).ok());
  REQUIRE(e.join(spec2.job, "north", north).ok());
  auto f2 = delta(spec2.job, "north", 0, std::vector<float>(n, 0.001f));
  REQUIRE(refused(e.submit(f2.h, f2.payload, north, nanos(0))).empty());
  *req.mutable_grant() = g2;
  // A step dir already there (a publish that fails): an error, and no .tmp-step-* left behind.
  REQUIRE(files::make_dirs(d.stage_dir("job-3") + "/checkpoints/step-000016").ok());
  REQUIRE(files::write_atomic(d.stage_dir("job-3") + "/checkpoints/step-000016/x", "in the way").ok());
  auto blocked = e.export_global(req, "site:north:trainer");
  CHECK_FALSE(blocked.ok());
  CHECK(temp_dirs_under(d.stage_dir("job-3")).empty());
  fs::remove_all(d.stage_dir("job-3") + "/checkpoints/step-000016");
  auto out = e.export_global(req, "site:north:trainer");
  REQUIRE_MESSAGE(out.ok(), out.err().to_string());
  CHECK(out->snapshot == d.stage_dir("job-3") + "/checkpoints/step-000016");
  CHECK(out->contributed == std::vector<std::string>{"north"});
  CHECK(out->missing == std::vector<std::string>{"south"});
  CHECK(ckpt::verify_snapshot(out->snapshot, 16, d.ckpt_key).empty());
  CHECK(temp_dirs_under(d.dir.path() + "/jobs").empty());
  // Retired by its export: the same export again (a retry, a restarted member 0) answers the same, writes nothing.
  auto again = e.export_global(req, "site:north:trainer");
  REQUIRE(again.ok());
  CHECK(again->snapshot == out->snapshot);
  CHECK(again->missing == std::vector<std::string>{"south"});
  CHECK(e.export_global(req, "site:south:trainer").ok());
  CHECK(e.export_global(req, "client").code() == errc::permission_denied);

  v1::AggregatorStatusReply st;
  e.describe(&st, "default", false);
  CHECK(st.jobs_size() == 0);
  REQUIRE(st.retired_size() == 2);
  for (const auto& r : st.retired()) CHECK(r.theta_sha256().size() == 32);
}

TEST_CASE("the aggregating and last-round gauges follow a job from live to a closed round to retired") {
  deployment d;
  metrics::service_metrics m("aggregator");
  auto o = d.options();
  o.metrics = &m;
  engine e(o);
  const auto g = d.grant("job-1", {"north"}, true, gpt2_spec(1));
  const auto spec = domain(g);
  REQUIRE(e.start(spec, g, "site:north:trainer", nanos(0)).ok());
  auto page = m.render();
  CHECK(page.find("loom_aggregator_aggregating{job=\"job-1.pretrain\"} 1") != std::string::npos);
  CHECK(page.find("loom_aggregator_last_round_unix_seconds{job=\"job-1.pretrain\"} 1700000000") != std::string::npos);
  d.clock += 60;  // a round closes a minute later: the reference moves
  REQUIRE(e.join(spec.job, "north", north).ok());
  const std::size_t n = model::make_param_layout(tiny()).total;
  auto f = delta(spec.job, "north", 0, std::vector<float>(n, 0.001f));
  REQUIRE(refused(e.submit(f.h, f.payload, north, nanos(0))).empty());
  CHECK(m.render().find("loom_aggregator_last_round_unix_seconds{job=\"job-1.pretrain\"} 1700000060") != std::string::npos);
  v1::ExportGlobalRequest req;
  *req.mutable_grant() = g;
  req.set_step(16);
  req.set_trainer_state("{\"step\": 16}");
  REQUIRE(e.export_global(req, "site:north:trainer").ok());
  CHECK(m.render().find("loom_aggregator_aggregating{job=\"job-1.pretrain\"} 0") != std::string::npos);
}

TEST_CASE("an export whose stage dir leads out of the jobs directory through a link is refused and writes nothing") {
  deployment d;
  engine e(d.options());
  files::temp_dir outside;
  REQUIRE(files::make_dirs(d.dir.path() + "/jobs").ok());
  fs::create_directory_symlink(outside.path(), d.dir.path() + "/jobs/job-1");
  const auto g = d.grant("job-1", {"north"}, true, gpt2_spec());
  REQUIRE(e.start(domain(g), g, "site:north:trainer", nanos(0)).ok());
  REQUIRE(e.join(domain(g).job, "north", north).ok());
  auto f = delta(domain(g).job, "north", 0, std::vector<float>(model::make_param_layout(tiny()).total, 0.001f));
  REQUIRE(refused(e.submit(f.h, f.payload, north, nanos(0))).empty());
  v1::ExportGlobalRequest req;
  *req.mutable_grant() = g;
  req.set_step(16);
  req.set_trainer_state("{\"step\": 16}");
  auto out = e.export_global(req, "site:north:trainer");
  CHECK(out.code() == errc::permission_denied);
  CHECK(fs::is_empty(outside.path()));
}

TEST_CASE("a restart reloads granted jobs only: retired ones stay retired, expired ones retire, tombstones go at expiry") {
  deployment d;
  const auto live = d.grant("job-1", {"site-0"}, false, flat_spec(), "default", "pretrain", 3600);
  const auto brief = d.grant("job-2", {"site-0"}, false, flat_spec(), "default", "pretrain", 60);
  const auto ended = d.grant("job-3", {"site-0"}, false, flat_spec(), "default", "pretrain", 3600);
  {
    engine first(d.options());
    for (const auto* g : {&live, &brief, &ended}) REQUIRE(first.start(domain(*g), *g, "trainer", nanos(0)).ok());
    REQUIRE(first.join(domain(ended).job, "site-0", {"site-0", key_source::diloco}).ok());
    auto f = delta(domain(ended).job, "site-0", 0, std::vector<float>(32, 0.01f));
    REQUIRE(refused(first.submit(f.h, f.payload, {"site-0", key_source::diloco}, nanos(0))).empty());
    v1::ExportGlobalRequest req;
    *req.mutable_grant() = ended;
    req.set_end_only(true);
    REQUIRE(first.export_global(req, "trainer").ok());
  }
  // A save cut short by a kill -9 leaves a temp file: gone on reload.
  const std::string job_dir = fs::path(state_path(d.dir.path(), domain(live).job)).parent_path().string();
  { std::ofstream(job_dir + "/state.bin.tmp.4242.7") << "half a save"; }
  d.clock += 120;  // job-2's grant has expired
  engine second(d.options());
  const auto loaded = second.load_saved(nanos(0));
  CHECK(loaded == std::vector<std::string>{domain(live).job});
  CHECK_FALSE(fs::exists(job_dir + "/state.bin.tmp.4242.7"));
  CHECK_FALSE(fs::exists(state_path(d.dir.path(), domain(brief).job)));  // retired on reload
  CHECK(second.start(domain(ended), ended, "trainer", nanos(0)).code() == errc::conflict);
  // A job from before grants (no grant in its state): not resumed.
  {
    auto s = domain(live);
    s.job = "old";
    REQUIRE(aggregation::create(s, std::vector<float>(64, 0.0f), state_path(d.dir.path(), "old"), nanos(0)).ok());
  }
  engine third(d.options());
  CHECK(third.load_saved(nanos(0)) == std::vector<std::string>{domain(live).job});
  CHECK(d.count("aggregation.resume_failed") == 1);
  // Past every grant's expiry: the live job retires and the tombstones go.
  d.clock += 7200;
  third.tick(nanos(0));
  CHECK_FALSE(fs::exists(state_path(d.dir.path(), domain(live).job)));
  third.tick(nanos(0));
  for (const auto* g : {&live, &brief, &ended}) CHECK_FALSE(fs::exists(retired_path(d.dir.path(), domain(*g).job)));
  v1::AggregatorStatusReply st;
  third.describe(&st, "", true);
  CHECK(st.jobs_size() == 0);
  CHECK(st.retired_size() == 0);
}

TEST_CASE("the status shows a tenant's own aggregations (an admin's: every tenant's)") {
  deployment d;
  engine e(d.options());
  const auto a = d.grant("job-1", {"site-0"}, false, flat_spec(), "acme");
  const auto b = d.grant("job-2", {"site-0"}, false, flat_spec(), "beta");
  REQUIRE(e.start(domain(a), a, "trainer", nanos(0)).ok());
  REQUIRE(e.start(domain(b), b, "trainer", nanos(0)).ok());
  v1::AggregatorStatusReply acme, all;
  e.describe(&acme, "acme", false);
  REQUIRE(acme.jobs_size() == 1);
  CHECK(acme.jobs(0).tenant() == "acme");
  CHECK(acme.jobs(0).job_id() == "job-1");
  e.describe(&all, "default", true);
  CHECK(all.jobs_size() == 2);
}
