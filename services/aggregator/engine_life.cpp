// The engine's jobs from grant to tombstone (engine.hpp): starting one with a
// grant (checked, then made on a thread of its own), reloading them at start,
// ending one with its stage's export, retiring it. engine.cpp has the rest.
#include "services/aggregator/engine.hpp"

#include "libs/audit/record.hpp"
#include "libs/auth/identity.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/confine.hpp"
#include "libs/files/fault.hpp"
#include "libs/files/files.hpp"
#include "libs/layout/layout.hpp"
#include "libs/model/init.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/global_export.hpp"
#include "libs/metrics/metrics.hpp"
#include "services/aggregator/job_store.hpp"
#include "services/aggregator/saver.hpp"
#include "services/aggregator/wire.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace loom::aggregator {
namespace {

namespace fs = std::filesystem;

bool same_spec(const aggregation_spec& a, const aggregation_spec& b) {
  loom::v1::AggregationSpec x, y;
  to_wire(a, &x);
  to_wire(b, &y);
  return x.SerializeAsString() == y.SerializeAsString();
}

// The fields two specs differ in, by name ("fragments, codec").
std::string spec_difference(const aggregation_spec& a, const aggregation_spec& b) {
  loom::v1::AggregationSpec x, y;
  to_wire(a, &x);
  to_wire(b, &y);
  std::string out;
  const auto* d = x.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    loom::v1::AggregationSpec fx, fy;  // each with only field i copied
    const auto* f = d->field(i);
    x.GetReflection()->SwapFields(&x, &fx, {f});
    y.GetReflection()->SwapFields(&y, &fy, {f});
    if (fx.SerializeAsString() != fy.SerializeAsString()) out += (out.empty() ? "" : ", ") + f->name();
  }
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// Flat θ of a verified snapshot (a step dir or a root: its newest) confined
// to the data dir; `rel` may be relative to it.
result<std::vector<float>> snapshot_params(const std::string& data_dir, const std::string& rel,
                                           const model::gpt2_config& cfg) {
  const fs::path root = fs::absolute(data_dir);
  const fs::path path = fs::path(rel).is_absolute() ? fs::path(rel) : root / rel;
  auto dir = files::confined({root.string()}, path.string());
  if (!dir) return make_error(dir.code(), "init_snapshot " + rel + ": " + dir.err().message);
  auto key = auth::load_token_key(layout::paths{data_dir}.checkpoint_key());
  if (!key) return make_error(key.code(), "init_snapshot: the checkpoint signing key: " + key.err().message);
  auto params = ckpt::read_gpt2_params(*dir, *key, cfg);
  if (!params) return make_error(params.code(), "init_snapshot " + rel + ": " + params.err().message);
  return params;
}

// Removes what a job left in <data>/aggregator/<job>/ (state.bin, its
// fragments' files, temp files of a save cut short), all but its tombstone.
void remove_state(const std::string& data_dir, const std::string& job) {
  std::error_code ec;
  const fs::path dir = fs::path(state_path(data_dir, job)).parent_path();
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().filename() != "retired") fs::remove_all(e.path(), ec);
}

}  // namespace

// A job being made on its own thread: StartAggregation waits on it a while.
struct engine::making {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  status outcome = ok_status();
};

// ---- starting ---------------------------------------------------------------

result<diloco::grant_terms> engine::check_grant(const loom::v1::AggregationGrant& grant, const std::string& peer,
                                                const char* what) {
  auto t = diloco::verify_grant(grant, o_.token_key, unix_now());
  if (!t) return make_error(t.code(), std::string(what) + " from key '" + peer + "': " + t.err().message);
  const auto p = auth::parse_peer(peer);
  const bool ok = t->edge_sites
                      ? p.kind == auth::peer_kind::site_service && p.service == "trainer" && t->granted(p.site)
                      : p.kind == auth::peer_kind::own_service && p.service == "trainer";
  if (!ok)
    return make_error(errc::permission_denied,
                      std::string(what) + " of " + t->job + "/" + t->stage + " from key '" + peer + "': only " +
                          (t->edge_sites ? "the trainers of its placed sites (" + joined(t->sites) + ")"
                                         : std::string("this deployment's trainers (key 'trainer')")) +
                          " may");
  return t;
}

result<std::vector<float>> engine::initial_params(const aggregation_spec& s, std::size_t total) {
  // A GPT-2 job from a seed starts from GPT-2's own initialisation, as a trainer would.
  if (s.init_snapshot.empty() && s.flat_size == 0 && s.init_seed != 0) {
    std::vector<float> p(total);
    model::init_params(s.gpt2, p, s.init_seed);
    return p;
  }
  if (s.init_snapshot.empty()) return seeded_params(total, s.init_seed);
  if (s.flat_size > 0) return make_error(errc::invalid_argument, "init_snapshot needs the GPT-2 shape, not flat_size");
  return snapshot_params(o_.data_dir, s.init_snapshot, s.gpt2);
}

result<started> engine::start(const aggregation_spec& spec, const loom::v1::AggregationGrant& grant,
                              const std::string& peer, nanos now) {
  auto terms = check_grant(grant, peer, "StartAggregation");
  if (!terms) return terms.err();
  auto granted = from_wire(grant.spec());
  if (!granted) return make_error(errc::invalid_argument, "the grant's spec: " + granted.err().message);
  if (!same_spec(spec, *granted))
    return make_error(errc::permission_denied, "StartAggregation of " + terms->job + "/" + terms->stage +
                                                   ": the spec asked for is not the one granted (" +
                                                   spec_difference(spec, *granted) + " differ)");
  // The job's own lineage: its previous stage's checkpoint, under the job's directory.
  if (!spec.init_snapshot.empty()) {
    const std::string job_dir = fs::path(terms->stage_dir).parent_path().string();
    if (auto in = files::confined({job_dir}, spec.init_snapshot); !in)
      return make_error(errc::permission_denied, "init_snapshot: a diloco stage starts from its job's previous "
                                                 "stage or from its seed: " + in.err().message);
  }
  return begin(spec, *terms, grant.SerializeAsString(), now);
}

result<started> engine::start(const aggregation_spec& spec, const diloco::grant_terms& terms, nanos now) {
  return begin(spec, terms, "", now);
}

result<started> engine::begin(const aggregation_spec& spec, const diloco::grant_terms& terms, std::string grant,
                              nanos) {  // the job's rounds open when it is made (make)
  std::shared_ptr<making> m;
  {
    std::lock_guard lock(mu_);
    // Threads of jobs made since the last start: joined here, not left to pile up.
    for (auto it = makers_.begin(); it != makers_.end();) {
      bool done;
      {
        std::lock_guard l(it->second->mu);
        done = it->second->done;
      }
      if (!done) {
        ++it;
        continue;
      }
      it->first.join();
      it = makers_.erase(it);
    }
    if (auto r = retired_.find(spec.job); r != retired_.end())
      return make_error(errc::conflict, "aggregation " + spec.job + " was retired (" + r->second.reason +
                                            "): its stage has ended");
    if (auto it = jobs_.find(spec.job); it != jobs_.end()) {
      held& h = it->second;
      if (h.terms.job != terms.job || h.terms.stage != terms.stage)
        return make_error(errc::conflict, "aggregation " + spec.job + " belongs to " + h.terms.job + "/" +
                                              h.terms.stage + ", not " + terms.job + "/" + terms.stage);
      if (!same_spec(h.spec, spec))
        return make_error(errc::already_exists, "aggregation " + spec.job + " runs with another spec");
      if (terms.expires_unix > h.terms.expires_unix) {  // a later placement's grant renews it
        h.terms = terms;
        h.grant = grant;
        if (h.agg) h.agg->set_grant(grant);
      }
      if (!h.agg) return started{{}, true, true};
      return started{h.agg->versions(), true, false};
    }
    auto plan = make_plan(spec);
    if (!plan) return plan.err();
    std::size_t live_values = 0;
    for (const auto& [job, h] : jobs_) live_values += h.values;
    if (auto st = check_start(plan->total(), spec.fragments, jobs_.size(), live_values, o_.limits); !st) {
      emit("aggregation.start_refused", spec.job, st.err().message, "", static_cast<int>(audit::decision::deny));
      return st.err();
    }
    m = std::make_shared<making>();
    jobs_[spec.job] = held{nullptr, spec, terms, grant, plan->total(), m};
    makers_.emplace_back(std::thread([this, spec, grant, m] { make(spec, grant, m); }), m);
  }
  status outcome = ok_status();
  {
    std::unique_lock l(m->mu);
    if (!m->cv.wait_for(l, o_.start_wait, [&] { return m->done; })) return started{{}, false, true};
    outcome = m->outcome;
  }
  if (!outcome) return outcome.err();
  std::lock_guard lock(mu_);
  if (held* h = find(spec.job)) return started{h->agg->versions(), false, false};
  return make_error(errc::unavailable, "aggregation " + spec.job + " ended as soon as it was made");
}

void engine::make(aggregation_spec spec, std::string grant, std::shared_ptr<making> m) {
  spec.resident_fragments = o_.resident_fragments;
  auto plan = make_plan(spec);  // checked by begin: cannot fail here
  auto init = plan ? initial_params(spec, plan->total()) : result<std::vector<float>>(plan.err());
  const auto now = std::chrono::duration_cast<nanos>(std::chrono::steady_clock::now().time_since_epoch());
  auto a = init ? aggregation::create(spec, std::move(*init), state_path(o_.data_dir, spec.job), now, grant)
                : result<std::unique_ptr<aggregation>>(init.err());
  status outcome = a ? ok_status() : status(a.err());
  // A full disk or a failed fsync passes: the job is forgotten below, so the
  // trainer's next StartAggregation makes it again from the start (its files
  // are written afresh). Unavailable, not a refusal: the trainer asks again
  // instead of failing the stage (found by the chaos harness across hosts).
  if (!a && files::storage_fault(a.err()))
    outcome = make_error(errc::unavailable, "aggregation " + spec.job + " could not write its first state (" +
                                                a.err().message + "): a storage fault at the cloud; ask again");
  if (a) (*a)->defer_saves();  // its first save is done; a close's runs on the saver
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(spec.job);
    if (a && it != jobs_.end()) {
      it->second.agg = std::move(*a);
      it->second.made.reset();
      live_gauges(spec.job, true);
      emit("aggregation.start", spec.job, "",
           "values=" + std::to_string(plan->total()) + " fragments=" + std::to_string(spec.fragments) +
               " codec=" + std::string(codec::to_string(spec.codec)) + " stage=" + it->second.terms.job + "/" +
               it->second.terms.stage + " sites=" + joined(it->second.terms.sites));
    } else {
      if (it != jobs_.end()) jobs_.erase(it);
      std::fprintf(stderr, "loom-aggregator: job %s not started: %s\n", spec.job.c_str(),
                   outcome.err().to_string().c_str());
      emit("aggregation.start_failed", spec.job, outcome.err().to_string(), "",
           static_cast<int>(audit::decision::error));
    }
  }
  std::lock_guard l(m->mu);
  m->outcome = outcome;
  m->done = true;
  m->cv.notify_all();
}

// ---- reloading --------------------------------------------------------------

std::vector<std::string> engine::load_saved(nanos now) {
  std::vector<std::string> loaded;
  std::lock_guard lock(mu_);
  const std::int64_t t = unix_now();
  for (const auto& job : retired_jobs(o_.data_dir)) {
    loom::v1::RetiredAggregation r;
    auto bytes = files::read_file(retired_path(o_.data_dir, job));
    std::error_code ec;
    if (!bytes || !r.ParseFromString(*bytes) || r.last().expires_unix() <= t) {  // expired (or unreadable): forgotten
      fs::remove_all(fs::path(retired_path(o_.data_dir, job)).parent_path(), ec);
      continue;
    }
    remove_state(o_.data_dir, job);  // a retirement cut short after its tombstone
    retired_[job] = tombstone{*bytes, r.last().tenant(), r.reason(), r.last().expires_unix()};
  }
  for (const auto& job : saved_jobs(o_.data_dir)) {
    if (retired_.count(job)) continue;
    const std::string path = state_path(o_.data_dir, job);
    // A save cut short by a kill -9 leaves a temp file or a fragment's file
    // no manifest names: restore() removes them once the job is back.
    auto st = load_state(path, /*with_values=*/false);  // each fragment is read when it is needed
    if (st) st->spec.resident_fragments = o_.resident_fragments;
    result<diloco::grant_terms> terms = make_error(errc::permission_denied, "it has no grant (made before grants)");
    if (st && !st->grant.empty()) {
      loom::v1::AggregationGrant g;
      terms = g.ParseFromString(st->grant) ? diloco::verify_grant_mac(g, o_.token_key)
                                           : result<diloco::grant_terms>(make_error(errc::corruption, "its grant does not parse"));
    }
    auto a = !st ? result<std::unique_ptr<aggregation>>(st.err())
             : !terms ? result<std::unique_ptr<aggregation>>(terms.err())
                      : aggregation::restore(std::move(*st), path, now);
    if (!a) {
      std::fprintf(stderr, "loom-aggregator: job %s not resumed: %s\n", job.c_str(), a.err().to_string().c_str());
      emit("aggregation.resume_failed", job, a.err().to_string());
      continue;
    }
    (*a)->defer_saves();
    emit("aggregation.resumed", job, "", "restarts=" + std::to_string((*a)->restarts()));
    const auto values = (*a)->rounds().optimizer().plan().total();
    held h{std::move(*a), {}, *terms, {}, values, nullptr};
    h.spec = h.agg->spec();
    h.grant = h.agg->grant();
    auto it = jobs_.emplace(job, std::move(h)).first;
    if (terms->expires_unix <= t) {
      retire(it, "its grant expired at unix " + std::to_string(terms->expires_unix) + " (found on reload)");
      continue;
    }
    live_gauges(job, true);
    loaded.push_back(job);
  }
  next_sweep_ = t + 1;
  return loaded;
}

// ---- retiring ---------------------------------------------------------------

// loom_aggregator_aggregating{job} (1 while live) and, as it goes live,
// loom_aggregator_last_round_unix_seconds{job} = now: the reference of
// LoomRoundStalled until its first round closes (closed() moves it).
void engine::live_gauges(const std::string& job, bool live) {
  if (!o_.metrics) return;
  o_.metrics->set("aggregating", {{"job", job}}, live ? 1 : 0);
  if (live) o_.metrics->set("last_round_unix_seconds", {{"job", job}}, static_cast<double>(unix_now()));
}

std::vector<std::string> engine::contributed(const held& h) const {
  std::vector<std::string> out;
  for (const auto& site : h.terms.sites)
    for (const auto& v : h.agg->rounds().sites())
      if (v.id == site && v.accepted > 0) out.push_back(site);
  return out;
}

void engine::retire(std::map<std::string, held>::iterator it, const std::string& reason, const export_answer* end) {
  const std::string job = it->first;
  held& h = it->second;
  saver_->forget(job);  // nothing of it is written after its state is removed below
  loom::v1::RetiredAggregation r;
  status_of(job, h, r.mutable_last());
  r.set_reason(reason);
  r.set_retired_unix(unix_now());
  if (auto theta = h.agg->full_params())
    r.set_theta_sha256(std::string(crypto::as_view(
        crypto::sha256({reinterpret_cast<const char*>(theta->data()), theta->size() * sizeof(float)}))));
  else  // the tombstone still goes: without it the grant could start the job again
    std::fprintf(stderr, "loom-aggregator: job %s retired without θ's hash: %s\n", job.c_str(),
                 theta.err().to_string().c_str());
  for (const auto& s : contributed(h)) r.add_contributed(s);
  for (const auto& s : h.terms.sites)
    if (std::find(r.contributed().begin(), r.contributed().end(), s) == r.contributed().end()) r.add_missing(s);
  if (end) {
    r.set_ended(true);
    r.set_snapshot(end->snapshot);
  }
  const std::string bytes = r.SerializeAsString();
  // The tombstone first: without it the state stays, to be retired again (at
  // the next start, or when its grant expires), never forgotten while the
  // grant could start the job again.
  if (auto st = files::write_atomic(retired_path(o_.data_dir, job), bytes, 0600); !st) {
    emit("aggregation.retire_failed", job, st.err().to_string(), "", static_cast<int>(audit::decision::error));
    std::fprintf(stderr, "loom-aggregator: job %s not retired: %s\n", job.c_str(), st.err().to_string().c_str());
  } else {
    remove_state(o_.data_dir, job);
  }
  retired_[job] = tombstone{bytes, h.terms.tenant, reason, h.terms.expires_unix};
  live_gauges(job, false);
  emit("aggregation.retired", job, reason,
       "stage=" + h.terms.job + "/" + h.terms.stage + " contributed=" + joined(contributed(h)) +
           " theta_sha256=" + crypto::to_hex(r.theta_sha256()));
  jobs_.erase(it);
}

result<export_answer> engine::export_global(const loom::v1::ExportGlobalRequest& req, const std::string& peer) {
  auto terms = check_grant(req.grant(), peer, "ExportGlobal");
  if (!terms) return terms.err();
  const std::string job = req.grant().spec().job();
  if (!req.job().empty() && req.job() != job)
    return make_error(errc::permission_denied, "ExportGlobal of " + req.job() + " with the grant of " + job);
  if (!req.stage_dir().empty() && req.stage_dir() != terms->stage_dir)
    return make_error(errc::permission_denied, "ExportGlobal into " + req.stage_dir() + ": the grant of " + job +
                                                   " names " + terms->stage_dir + ", and only it");
  std::lock_guard lock(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end() || !it->second.agg) {
    // Ended already by this grant's export: the same answer again.
    if (auto t = retired_.find(job); t != retired_.end()) {
      loom::v1::RetiredAggregation r;
      if (r.ParseFromString(t->second.bytes) && r.last().job_id() == terms->job && r.last().stage() == terms->stage) {
        export_answer again{r.snapshot(), {r.contributed().begin(), r.contributed().end()},
                            {r.missing().begin(), r.missing().end()}};
        if (r.ended() && (req.end_only() || !again.snapshot.empty())) return again;
      }
    }
    return ended(job);
  }
  held& h = it->second;
  if (h.terms.job != terms->job || h.terms.stage != terms->stage || h.terms.stage_dir != terms->stage_dir)
    return make_error(errc::permission_denied, "ExportGlobal: aggregation " + job + " was granted to " + h.terms.job +
                                                   "/" + h.terms.stage + ", not " + terms->job + "/" + terms->stage);
  export_answer out;
  out.contributed = contributed(h);
  for (const auto& s : h.terms.sites)
    if (std::find(out.contributed.begin(), out.contributed.end(), s) == out.contributed.end()) out.missing.push_back(s);
  const std::size_t need = h.spec.min_sites > 0 ? h.spec.min_sites : h.terms.sites.size();
  if (out.contributed.size() < need) {
    const std::string why = "site" + std::string(out.missing.size() == 1 ? " " : "s ") + joined(out.missing) +
                            " never contributed a delta the aggregator accepted; " + std::to_string(need) + " of " +
                            std::to_string(h.terms.sites.size()) + " must (" +
                            (h.spec.min_sites > 0 ? "diloco.min_sites" : "every site, unless diloco.min_sites says fewer") +
                            "), " + std::to_string(out.contributed.size()) + " did (" + joined(out.contributed) + ")";
    emit("aggregation.export", job, why, "stage_dir=" + h.terms.stage_dir, static_cast<int>(audit::decision::deny));
    retire(it, "missing contributions: " + joined(out.missing));
    return make_error(errc::conflict, "aggregation " + job + ": " + why);
  }
  if (!req.end_only()) {
    if (h.spec.flat_size > 0) return make_error(errc::invalid_argument, "aggregation " + job + " is not a GPT-2 model");
    auto theta = h.agg->full_params();
    auto snap = theta ? write_global_snapshot(o_.data_dir, h.spec.gpt2, *theta, h.terms.stage_dir, req.step(),
                                              req.trainer_state())
                      : result<std::string>(theta.err());
    if (!snap) {
      emit("aggregation.export", job, snap.err().message, "stage_dir=" + h.terms.stage_dir,
           static_cast<int>(audit::decision::error));
      return snap.err();
    }
    out.snapshot = *snap;
    emit("aggregation.export", job, "", "snapshot=" + *snap + " contributed=" + joined(out.contributed));
  }
  retire(it, req.end_only() ? "ended (member 0 wrote the stage's checkpoint)" : "exported to " + out.snapshot, &out);
  return out;
}

}  // namespace loom::aggregator
