#include "services/aggregator/engine.hpp"

#include "libs/model/init.hpp"
#include "services/aggregator/global_export.hpp"

#include "libs/audit/record.hpp"
#include "libs/auth/token.hpp"
#include "libs/ckpt/safetensors.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/layout/layout.hpp"
#include "libs/metrics/metrics.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/job_store.hpp"
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

// The 16 tensors of a verified snapshot's model.safetensors, in buffer order.
result<std::vector<float>> snapshot_params(const std::string& data_dir, const std::string& rel,
                                           const model::gpt2_config& cfg) {
  const fs::path root = fs::weakly_canonical(data_dir);
  const fs::path dir = fs::weakly_canonical(fs::path(rel).is_absolute() ? fs::path(rel) : root / rel);
  if (std::mismatch(root.begin(), root.end(), dir.begin(), dir.end()).first != root.end())
    return make_error(errc::permission_denied, "init_snapshot " + rel + " is outside the data dir " + root.string());
  auto key = auth::load_token_key(layout::paths{data_dir}.checkpoint_key());
  if (!key) return make_error(key.code(), "init_snapshot: the checkpoint signing key: " + key.err().message);
  std::string where;
  const auto step = ckpt::parse_step_dir(dir.filename().string());
  if (step && fs::exists(dir / "MANIFEST.json")) {
    auto problems = ckpt::verify_snapshot(dir.string(), *step, *key);
    if (!problems.empty()) return make_error(errc::corruption, "init_snapshot " + rel + ": " + problems.front());
    where = dir.string();
  } else {
    auto loaded = ckpt::load_latest(dir.string(), *key);
    if (!loaded) return make_error(loaded.code(), "init_snapshot " + rel + ": " + loaded.err().message);
    where = loaded->dir;
  }
  auto file = ckpt::read_safetensors(where + "/model.safetensors");
  if (!file) return file.err();
  const auto layout = model::make_param_layout(cfg);
  std::vector<float> out(layout.total);
  for (int i = 0; i < model::num_tensors; ++i) {
    const auto t = static_cast<model::tensor_id>(i);
    const auto* info = file->find(std::string(model::tensor_name(t)));
    if (!info || info->type != ckpt::dtype::F32 || info->data.size() != layout.size(t) * sizeof(float))
      return make_error(errc::invalid_argument, "init_snapshot " + rel + ": tensor " +
                                                    std::string(model::tensor_name(t)) +
                                                    " is missing or not the job's F32 shape");
    std::memcpy(out.data() + layout.offset(t), info->data.data(), info->data.size());
  }
  return out;
}

}  // namespace

engine::engine(engine_options o) : o_(std::move(o)) {}

// outcome: audit::decision as int (1 allow, 2 deny, 3 error), so the header needs no audit include.
void engine::emit(std::string action, std::string job, std::string reason, std::string payload, int outcome) {
  if (!o_.audit) return;
  auto r = audit::service_record(o_.node_id, o_.zone, "aggregator", std::move(action), std::move(job),
                                 std::move(reason), std::move(payload));
  r.outcome = static_cast<audit::decision>(outcome);
  o_.audit(std::move(r));
}

void engine::count(std::string_view name, const std::map<std::string, std::string>& labels, double by) {
  if (o_.metrics) o_.metrics->add(name, labels, by);
}

aggregation* engine::find(const std::string& job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() ? nullptr : it->second.get();
}

std::vector<std::string> engine::load_saved(nanos now) {
  std::vector<std::string> loaded;
  std::lock_guard lock(mu_);
  for (const auto& job : saved_jobs(o_.data_dir)) {
    const std::string path = state_path(o_.data_dir, job);
    // A save cut short by a kill -9 leaves its temp file (write_atomic's
    // <file>.tmp.<pid>.<n>); one aggregator runs per data dir, so any there now is such a one.
    std::error_code ec;
    const auto dir = std::filesystem::path(path).parent_path();
    const std::string stem = std::filesystem::path(path).filename().string() + ".tmp.";
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.path().filename().string().rfind(stem, 0) == 0) std::filesystem::remove(e.path(), ec);
    auto st = load_state(path);
    auto a = st ? aggregation::restore(std::move(*st), path, now) : result<std::unique_ptr<aggregation>>(st.err());
    if (!a) {
      std::fprintf(stderr, "loom-aggregator: job %s not resumed: %s\n", job.c_str(), a.err().to_string().c_str());
      emit("aggregation.resume_failed", job, a.err().to_string());
      continue;
    }
    emit("aggregation.resumed", job, "", "restarts=" + std::to_string((*a)->restarts()));
    jobs_[job] = std::move(*a);
    loaded.push_back(job);
  }
  return loaded;
}

result<std::vector<float>> engine::initial_params(const aggregation_spec& s, std::size_t total) {
  // A GPT-2 job from a seed (an edge-site stage: no site's snapshot is readable
  // here) starts from GPT-2's own initialisation, as a trainer would.
  if (s.init_snapshot.empty() && s.flat_size == 0 && s.init_seed != 0) {
    std::vector<float> p(total);
    model::init_params(s.gpt2, p, s.init_seed);
    return p;
  }
  if (s.init_snapshot.empty()) return seeded_params(total, s.init_seed);
  if (s.flat_size > 0) return make_error(errc::invalid_argument, "init_snapshot needs the GPT-2 shape, not flat_size");
  return snapshot_params(o_.data_dir, s.init_snapshot, s.gpt2);
}

result<std::string> engine::export_global(const std::string& job, const std::string& stage_dir, std::uint64_t step,
                                          const std::string& trainer_state) {
  std::lock_guard lock(mu_);
  aggregation* a = find(job);
  if (!a) return make_error(errc::not_found, "no aggregation " + job);
  if (a->spec().flat_size > 0) return make_error(errc::invalid_argument, "aggregation " + job + " is not a GPT-2 model");
  auto out = write_global_snapshot(o_.data_dir, a->spec().gpt2, a->rounds().optimizer().params(), stage_dir, step,
                                   trainer_state);
  if (out) emit("aggregation.export", job, "", "snapshot=" + *out);
  else emit("aggregation.export", job, out.err().message, "stage_dir=" + stage_dir, 3);
  return out;
}

result<started> engine::start(const aggregation_spec& spec, nanos now) {
  std::lock_guard lock(mu_);
  if (aggregation* a = find(spec.job)) {
    if (!same_spec(a->spec(), spec))
      return make_error(errc::already_exists, "aggregation " + spec.job + " runs with another spec");
    return started{a->rounds().optimizer().versions(), true};
  }
  auto plan = make_plan(spec);
  if (!plan) return plan.err();
  auto init = initial_params(spec, plan->total());
  if (!init) return init.err();
  auto a = aggregation::create(spec, std::move(*init), state_path(o_.data_dir, spec.job), now);
  if (!a) return a.err();
  started s{(*a)->rounds().optimizer().versions(), false};
  emit("aggregation.start", spec.job, "",
       "values=" + std::to_string(plan->total()) + " fragments=" + std::to_string(spec.fragments) +
           " codec=" + std::string(codec::to_string(spec.codec)));
  jobs_[spec.job] = std::move(*a);
  return s;
}

result<join_answer> engine::join(const std::string& job, const std::string& site, const std::string& principal) {
  std::lock_guard lock(mu_);
  aggregation* a = find(job);
  if (!a) return make_error(errc::not_found, "no aggregation " + job);
  if (site != principal) {
    emit("aggregation.join_refused", job, "site '" + site + "' asked with the key of '" + principal + "'", "",
         static_cast<int>(audit::decision::deny));
    return make_error(errc::permission_denied, "join as site '" + site + "' with the key of '" + principal + "'");
  }
  auto r = a->join(site, "peers/" + principal);
  if (r) emit("aggregation.join", job, "", "site=" + site);
  return r;
}

std::variant<delta_outcome, refusal> engine::submit(const delta_header& h, std::string_view payload,
                                                    const std::string& principal, nanos now) {
  std::lock_guard lock(mu_);
  aggregation* a = find(h.job);
  auto out = a ? a->submit(h, payload, principal, now)
               : std::variant<delta_outcome, refusal>(refusal{"unknown_job", make_error(errc::not_found, "no aggregation " + h.job)});
  if (auto* r = std::get_if<refusal>(&out)) {
    count("deltas_rejected_total", {{"job", h.job}, {"reason", r->reason}});
    if (r->reason == "stale") count("deltas_dropped_total", {{"job", h.job}});
    emit("aggregation.delta_rejected", h.job, r->reason + ": " + r->err.message,
         "site=" + h.meta.site + " key=" + principal + " fragment=" + std::to_string(h.meta.fragment) +
             " round=" + std::to_string(h.meta.round),
         static_cast<int>(audit::decision::deny));
    return out;
  }
  const auto& d = std::get<delta_outcome>(out);
  // Per site once accepted (a refused delta's site name is the sender's word: not a label).
  count(d.acc.late ? "deltas_late_total" : "deltas_accepted_total", {{"job", h.job}, {"site", h.meta.site}});
  count("bytes_received_total", {{"job", h.job}, {"site", h.meta.site}}, static_cast<double>(payload.size()));
  if (d.closed) closed(*a, *d.closed);
  return out;
}

void engine::closed(const aggregation& a, const close_report& r) {
  const std::string& job = a.spec().job;
  const std::string where = "fragment " + std::to_string(r.round.fragment) + " round " + std::to_string(r.round.round);
  if (r.round.version == 0 || !r.saved) {
    count("round_failures_total", {{"job", job}});
    emit("aggregation.round_failed", job, where + ": " + (r.saved ? "not closed" : r.saved.err().to_string()), "",
         static_cast<int>(audit::decision::error));
    if (r.round.version == 0) return;
  }
  if (!r.round.by_quorum)
    emit("aggregation.round_short", job,
         where + " closed by its deadline with " + std::to_string(r.round.on_time) + " of " +
             std::to_string(a.rounds().quorum()) + " sites");
  if (!o_.metrics) return;
  const std::string p = std::to_string(r.round.fragment);
  o_.metrics->set("round", {{"job", job}, {"fragment", p}}, static_cast<double>(r.round.version));
  o_.metrics->set("quorum_size", {{"job", job}}, r.round.on_time);
  o_.metrics->set("outer_step_seconds", {{"job", job}}, r.step_seconds);
  count("rounds_closed_total", {{"job", job}, {"by", r.round.by_quorum ? "quorum" : "deadline"}});
}

result<pull_answer> engine::pull(const std::string& job, const std::string& site, std::uint32_t p,
                                 std::uint64_t have_version, bool want_params) {
  std::lock_guard lock(mu_);
  aggregation* a = find(job);
  if (!a) return make_error(errc::not_found, "no aggregation " + job);
  auto r = a->pull(site, p, have_version, want_params);
  if (r && r->has_update)
    count("bytes_sent_total", {{"job", job}, {"site", site}}, static_cast<double>(r->payload->size()));
  return r;
}

result<aggregation_spec> engine::spec(const std::string& job) {
  std::lock_guard lock(mu_);
  aggregation* a = find(job);
  if (!a) return make_error(errc::not_found, "no aggregation " + job);
  return a->spec();
}

status engine::round_status(const std::string& job, loom::v1::RoundStatusList* out) {
  std::lock_guard lock(mu_);
  aggregation* a = find(job);
  if (!a) return make_error(errc::not_found, "no aggregation " + job);
  for (int p = 0; p < a->rounds().optimizer().plan().fragments(); ++p)
    to_wire(a->rounds(), job, static_cast<std::uint32_t>(p), out->add_fragments());
  return ok_status();
}

void engine::tick(nanos now) {
  std::lock_guard lock(mu_);
  for (auto& [job, a] : jobs_)
    for (const auto& r : a->tick(now)) closed(*a, r);
}

void engine::refuse_header(const std::string& principal, const error& e) {
  count("deltas_rejected_total", {{"job", ""}, {"reason", "bad_header"}});
  emit("aggregation.delta_rejected", "", "bad_header: " + e.message, "key=" + principal,
       static_cast<int>(audit::decision::deny));
}

void engine::refused_connections(std::uint64_t n) {
  count("handshakes_refused_total", {}, static_cast<double>(n));
  emit("aggregation.key_refused", "",
       std::to_string(n) + " CURVE handshake(s) with a key that is neither this deployment's nor a peer's (keys/peers)",
       "", static_cast<int>(audit::decision::deny));
}

void engine::frame_received(std::string_view type) {
  // The types the delta socket answers; anything else is counted as "unknown"
  // (a label per name a peer could choose would let it grow the metrics).
  constexpr std::string_view known[] = {"DeltaHeader", "DeltaJoin", "GlobalPull", "RoundStatusQuery"};
  std::string_view name = "unknown";
  constexpr std::string_view prefix = "loom.v1.";
  if (type.starts_with(prefix))
    for (auto k : known)
      if (type.substr(prefix.size()) == k) name = k;
  count("frames_received_total", {{"type", std::string(name)}});
  std::lock_guard lock(mu_);
  auto it = frames_.find(name);
  if (it == frames_.end()) it = frames_.emplace(std::string(name), 0).first;
  ++it->second;
}

void engine::describe(loom::v1::AggregatorStatusReply* out) {
  std::lock_guard lock(mu_);
  for (const auto& [type, n] : frames_) (*out->mutable_frames_received())[type] = n;
  for (auto& [job, a] : jobs_) {
    auto* j = out->add_jobs();
    to_wire(a->spec(), j->mutable_spec());
    const auto& rounds = a->rounds();
    for (int p = 0; p < rounds.optimizer().plan().fragments(); ++p) {
      auto* f = j->add_fragments();
      to_wire(rounds, job, static_cast<std::uint32_t>(p), f);
      for (const auto& [reason, n] : a->wire_refusals()) (*f->mutable_rejected_total())[reason] = n;
      out->set_round(std::max<std::uint64_t>(out->round(), f->round()));
    }
    for (const auto& s : rounds.sites()) j->add_sites(s.id + ":" + std::string(to_string(s.phase)));
    j->set_deltas_accepted_total(rounds.stats().arrivals + rounds.stats().late_folded);
    j->set_bytes_received_total(a->bytes_received());
    j->set_bytes_sent_total(a->bytes_sent());
    j->set_restarts(a->restarts());
  }
}

}  // namespace loom::aggregator
