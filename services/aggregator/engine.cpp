// The engine's plumbing, the delta socket and the status (engine.hpp); a
// job's life (start with a grant, reload, export, retirement) is engine_life.cpp.
#include "services/aggregator/engine.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/audit/record.hpp"
#include "libs/auth/token.hpp"
#include "libs/metrics/metrics.hpp"
#include "loom/v1/aggregator.pb.h"
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

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

}  // namespace

std::string site_key::id() const {
  switch (source) {
    case key_source::peer: return "peers/" + site;
    case key_source::diloco: return "diloco/" + site;
    case key_source::enrolled: return "sites/" + site;
    case key_source::own: break;
  }
  return site;
}

engine_options::engine_options(std::string d, std::string n, std::string z, std::function<void(audit::record)> a,
                               metrics::service_metrics* m)
    : data_dir(std::move(d)), node_id(std::move(n)), zone(std::move(z)), audit(std::move(a)), metrics(m) {}

engine::engine(engine_options o)
    : o_(std::move(o)),
      saver_(std::make_unique<saver>([this](const std::string& job, const save_task& t, const status& st,
                                            double secs) { saved(job, t, st, secs); })) {}

engine::~engine() {
  for (auto& [t, m] : makers_)
    if (t.joinable()) t.join();
  saver_.reset();  // writes the saves still queued, while the jobs they publish to exist
}

void engine::flush_saves() { saver_->drain(); }

std::int64_t engine::unix_now() const {
  if (o_.unix_now) return o_.unix_now();
  return std::chrono::duration_cast<std::chrono::seconds>(loom::wall_now().time_since_epoch()).count();
}

// outcome: audit::decision as int (1 allow, 2 deny, 3 error), so the header needs no audit include.
void engine::emit(std::string action, std::string job, std::string reason, std::string payload, int outcome,
                  std::string peer) {
  if (!o_.audit) return;
  auto r = audit::service_record(o_.node_id, o_.zone, "aggregator", std::move(action), std::move(job),
                                 std::move(reason), std::move(payload));
  r.outcome = static_cast<audit::decision>(outcome);
  r.peer = std::move(peer);
  o_.audit(std::move(r));
}

void engine::count(std::string_view name, const std::map<std::string, std::string>& labels, double by) {
  if (o_.metrics) o_.metrics->add(name, labels, by);
}

engine::held* engine::find(const std::string& job) {
  auto it = jobs_.find(job);
  return it == jobs_.end() || !it->second.agg ? nullptr : &it->second;
}

error engine::ended(const std::string& job) const {
  if (auto it = retired_.find(job); it != retired_.end())
    return make_error(errc::not_found, "aggregation " + job + " has ended (" + it->second.reason + ")");
  if (auto it = jobs_.find(job); it != jobs_.end())
    return make_error(errc::unavailable, "aggregation " + job + " is still being made; try again");
  return make_error(errc::not_found, "no aggregation " + job);
}

// ---- the delta socket -------------------------------------------------------

status engine::check_site(const held& h, const std::string& job, const std::string& site, const site_key& from,
                          const char* action) {
  std::string why;
  const bool right_kind = h.terms.edge_sites ? from.source == key_source::enrolled
                                             : from.source == key_source::diloco || from.source == key_source::peer;
  if (site != from.site) why = "asked as site '" + site + "' with the key of '" + from.id() + "'";
  else if (!right_kind || !h.terms.granted(from.site))
    why = "key '" + from.id() + "' is not one of the sites placed on " + h.terms.job + "/" + h.terms.stage + " (" +
          joined(h.terms.sites) + (h.terms.edge_sites ? ", enrolled edge sites" : ", this deployment's") + ")";
  if (why.empty()) return ok_status();
  emit(action, job, why, "key=" + from.id(), static_cast<int>(audit::decision::deny), from.id());
  return make_error(errc::permission_denied, why);
}

result<std::uint64_t> engine::stream_limit(const std::string& job, std::uint32_t fragment, const std::string& site,
                                           const site_key& from) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h) return ended(job);
  if (auto st = check_site(*h, job, site, from, "aggregation.chunk_refused"); !st) return st.err();
  auto plan = make_plan(h->spec);
  if (!plan) return plan.err();
  if (fragment >= static_cast<std::uint32_t>(plan->fragments()))
    return make_error(errc::invalid_argument, "fragment " + std::to_string(fragment) + " out of range: the job has " +
                                                  std::to_string(plan->fragments()));
  return plan->size(static_cast<int>(fragment)) * 4 + 4096;
}

result<join_answer> engine::join(const std::string& job, const std::string& site, const site_key& from) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h) return ended(job);
  if (auto st = check_site(*h, job, site, from, "aggregation.join_refused"); !st) return st.err();
  auto r = h->agg->join(site, from.id());
  if (r) emit("aggregation.join", job, "", "site=" + site);
  return r;
}

std::variant<delta_outcome, refusal> engine::submit(const delta_header& h, std::string_view payload,
                                                    const site_key& from, nanos now) {
  std::lock_guard lock(mu_);
  held* j = find(h.job);
  aggregation* a = j ? j->agg.get() : nullptr;
  std::variant<delta_outcome, refusal> out = refusal{"unknown_job", ended(h.job)};
  if (a) {
    const bool right_kind = j->terms.edge_sites ? from.source == key_source::enrolled
                                                : from.source == key_source::diloco || from.source == key_source::peer;
    if (!right_kind || !j->terms.granted(from.site))
      out = a->refuse("not_granted", make_error(errc::permission_denied,
                                                "delta from key '" + from.id() + "': not one of the sites placed on " +
                                                    j->terms.job + "/" + j->terms.stage + " (" + joined(j->terms.sites) + ")"));
    else
      out = a->submit(h, payload, from.site, now);
  }
  if (auto* r = std::get_if<refusal>(&out)) {
    count("deltas_rejected_total", {{"job", h.job}, {"reason", r->reason}});
    if (r->reason == "stale") count("deltas_dropped_total", {{"job", h.job}});
    emit("aggregation.delta_rejected", h.job, r->reason + ": " + r->err.message,
         "site=" + h.meta.site + " key=" + from.id() + " fragment=" + std::to_string(h.meta.fragment) +
             " round=" + std::to_string(h.meta.round) + " tokens=" + std::to_string(h.meta.tokens),
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
  if (r.save) saver_->push(job, r.save);
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
  o_.metrics->set("last_round_unix_seconds", {{"job", job}}, static_cast<double>(unix_now()));
  o_.metrics->set("fragments_resident", {{"job", job}}, a.resident_fragments());
  o_.metrics->set("fragment_reads", {{"job", job}}, static_cast<double>(a.fragment_loads()));
  count("rounds_closed_total", {{"job", job}, {"by", r.round.by_quorum ? "quorum" : "deadline"}});
}

void engine::saved(const std::string& job, const save_task& t, const status& st, double seconds) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h || !h->agg->saves_into(t)) return;  // retired meanwhile
  const std::uint32_t p = t.fragment.fragment;
  h->agg->save_done(p);
  if (o_.metrics) {
    o_.metrics->set("save_seconds", {{"job", job}}, seconds);
    o_.metrics->set("fragments_resident", {{"job", job}}, h->agg->resident_fragments());
  }
  if (st) return;
  // The version is published all the same, as the round's state lives on in
  // memory; the files keep the fragment's previous version until a later save.
  count("round_failures_total", {{"job", job}});
  emit("aggregation.round_failed", job,
       "fragment " + std::to_string(p) + " version " + std::to_string(t.fragment.version) + ": " + st.err().to_string(),
       "", static_cast<int>(audit::decision::error));
}

result<pull_answer> engine::pull(const std::string& job, const std::string& site, std::uint32_t p,
                                 std::uint64_t have_version, bool want_params, const site_key& from) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h) return ended(job);
  if (auto st = check_site(*h, job, site, from, "aggregation.pull_refused"); !st) return st.err();
  auto r = h->agg->pull(site, p, have_version, want_params);
  if (r && r->has_update)
    count("bytes_sent_total", {{"job", job}, {"site", site}}, static_cast<double>(r->payload->size()));
  return r;
}

result<aggregation_spec> engine::spec(const std::string& job) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h) return ended(job);
  return h->spec;
}

status engine::round_status(const std::string& job, const site_key& from, loom::v1::RoundStatusList* out) {
  std::lock_guard lock(mu_);
  held* h = find(job);
  if (!h) return ended(job);
  if (auto st = check_site(*h, job, from.site, from, "aggregation.status_refused"); !st) return st;
  for (int p = 0; p < h->agg->rounds().optimizer().plan().fragments(); ++p)
    to_wire(h->agg->rounds(), job, static_cast<std::uint32_t>(p), out->add_fragments());
  return ok_status();
}

void engine::tick(nanos now) {
  std::lock_guard lock(mu_);
  for (auto& [job, h] : jobs_)
    if (h.agg)
      for (const auto& r : h.agg->tick(now)) closed(*h.agg, r);
  const std::int64_t t = unix_now();
  if (t < next_sweep_) return;
  next_sweep_ = t + 1;  // expiry is in seconds
  for (auto it = jobs_.begin(); it != jobs_.end();) {
    auto next = std::next(it);
    if (it->second.agg && it->second.terms.expires_unix <= t)
      retire(it, "its grant expired at unix " + std::to_string(it->second.terms.expires_unix));
    it = next;
  }
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (it->second.expires_unix > t) {
      ++it;
      continue;
    }
    std::error_code ec;
    fs::remove_all(fs::path(retired_path(o_.data_dir, it->first)).parent_path(), ec);
    it = retired_.erase(it);
  }
}

void engine::refuse_header(const std::string& principal, const error& e) {
  count("deltas_rejected_total", {{"job", ""}, {"reason", "bad_header"}});
  emit("aggregation.delta_rejected", "", "bad_header: " + e.message, "key=" + principal,
       static_cast<int>(audit::decision::deny), principal);
}

void engine::refuse_unadmitted(const std::string& principal, const std::string& type) {
  emit("aggregation.key_refused", "",
       auth::printable(type.substr(0, 128)) + " on an open connection of key '" + principal +
           "', no longer admitted (a revoked site?)",
       "key=" + principal, static_cast<int>(audit::decision::deny), principal);
}

void engine::refused_connections(std::uint64_t n) {
  count("handshakes_refused_total", {}, static_cast<double>(n));
  emit("aggregation.key_refused", "",
       std::to_string(n) + " CURVE handshake(s) with a key that is neither this deployment's nor a peer's (keys/peers)",
       "", static_cast<int>(audit::decision::deny));
}

namespace {
// The types the delta socket answers; anything else is counted as "unknown"
// (a label per name a peer could choose would let it grow the metrics).
std::string_view frame_name(std::string_view type) {
  constexpr std::string_view known[] = {"DeltaHeader", "DeltaChunk", "DeltaJoin", "GlobalPull", "RoundStatusQuery"};
  constexpr std::string_view prefix = "loom.v1.";
  if (type.starts_with(prefix))
    for (auto k : known)
      if (type.substr(prefix.size()) == k) return k;
  return "unknown";
}
// An enrolled edge site's trainer ("sites/<S>", delta_server's key_of) is link S.
std::string link_of(std::string_view principal) {
  constexpr std::string_view prefix = "sites/";
  return principal.starts_with(prefix) ? std::string(principal.substr(prefix.size())) : std::string("local");
}
}  // namespace

void engine::frame_answered(std::string_view type, std::string_view principal, std::size_t bytes) {
  if (o_.metrics) o_.metrics->count_link(link_of(principal), frame_name(type), "out", bytes);
}

void engine::frame_received(std::string_view type, std::string_view principal, std::size_t bytes) {
  const std::string_view name = frame_name(type);
  count("frames_received_total", {{"type", std::string(name)}});
  if (o_.metrics && !principal.empty()) o_.metrics->count_link(link_of(principal), name, "in", bytes);
  std::lock_guard lock(mu_);
  auto it = frames_.find(name);
  if (it == frames_.end()) it = frames_.emplace(std::string(name), 0).first;
  ++it->second;
}

// ---- status -----------------------------------------------------------------

void engine::status_of(const std::string& job, const held& h, loom::v1::AggregationStatus* j) const {
  to_wire(h.spec, j->mutable_spec());
  j->set_tenant(h.terms.tenant);
  j->set_job_id(h.terms.job);
  j->set_stage(h.terms.stage);
  for (const auto& s : h.terms.sites) j->add_granted_sites(s);
  j->set_expires_unix(h.terms.expires_unix);
  if (!h.agg) {
    j->set_starting(true);
    return;
  }
  const auto& rounds = h.agg->rounds();
  for (int p = 0; p < rounds.optimizer().plan().fragments(); ++p) {
    auto* f = j->add_fragments();
    to_wire(rounds, job, static_cast<std::uint32_t>(p), f);
    for (const auto& [reason, n] : h.agg->wire_refusals()) (*f->mutable_rejected_total())[reason] = n;
  }
  for (const auto& s : rounds.sites()) j->add_sites(s.id + ":" + std::string(to_string(s.phase)));
  j->set_deltas_accepted_total(rounds.stats().arrivals + rounds.stats().late_folded);
  j->set_bytes_received_total(h.agg->bytes_received());
  j->set_bytes_sent_total(h.agg->bytes_sent());
  j->set_restarts(h.agg->restarts());
  j->set_max_delta_norm_ratio(h.agg->max_norm_ratio());
  j->set_max_delta_bound_use(h.agg->max_bound_use());
}

void engine::describe(loom::v1::AggregatorStatusReply* out, const std::string& tenant, bool all_tenants) {
  std::lock_guard lock(mu_);
  for (const auto& [type, n] : frames_) (*out->mutable_frames_received())[type] = n;
  for (auto& [job, h] : jobs_) {
    if (!all_tenants && h.terms.tenant != tenant) continue;
    auto* j = out->add_jobs();
    status_of(job, h, j);
    for (const auto& f : j->fragments()) out->set_round(std::max<std::uint64_t>(out->round(), f.round()));
  }
  for (const auto& [job, t] : retired_) {
    if (!all_tenants && t.tenant != tenant) continue;
    (void)out->add_retired()->ParseFromString(t.bytes);
  }
}

}  // namespace loom::aggregator
