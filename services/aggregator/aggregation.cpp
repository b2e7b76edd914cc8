#include "services/aggregator/aggregation.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "services/aggregator/job_store.hpp"
#include "services/aggregator/limits.hpp"
#include "services/aggregator/wire.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <set>
#include <utility>

namespace loom::aggregator {
namespace {

std::string_view as_chars(const std::vector<std::byte>& b) {
  return {reinterpret_cast<const char*>(b.data()), b.size()};
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// The reject reason job_rounds counted between two snapshots of its stats.
std::string counted_reason(const round_stats& before, const round_stats& after) {
  for (int r = 0; r < reject_reason_count; ++r)
    if (after.rejected[r] != before.rejected[r]) return std::string(to_string(static_cast<reject_reason>(r)));
  return "refused";
}

}  // namespace

bool valid_job_name(std::string_view job) {
  if (job.empty() || job.size() > 64 || job.front() == '.') return false;
  for (char c : job)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
          c == '-'))
      return false;
  return true;
}

result<diloco::fragment_plan> make_plan(const aggregation_spec& s) {
  if (s.fragments < 1) return make_error(errc::invalid_argument, "fragments must be >= 1");
  if (s.flat_size > 0) return diloco::fragment_plan::flat(s.flat_size, s.fragments, s.sync_every);
  return diloco::fragment_plan::for_gpt2(s.gpt2, s.fragments, s.sync_every);
}

std::vector<float> seeded_params(std::size_t n, std::uint64_t seed) {
  std::vector<float> v(n, 0.0f);
  if (seed == 0) return v;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);  // GPT-2's initialisation scale
  for (auto& x : v) x = normal(rng);
  return v;
}

aggregation::aggregation(aggregation_spec spec, job_rounds rounds, diloco::downlink down, std::string state_file)
    : spec_(std::move(spec)),
      rounds_(std::make_unique<job_rounds>(std::move(rounds))),
      state_file_(std::move(state_file)),
      downlink_(std::move(down)) {
  const auto& plan = rounds_->optimizer().plan();
  last_update_.resize(plan.fragments());
  unsaved_.resize(plan.fragments());
  saving_.resize(plan.fragments());
  theta_norm_.assign(plan.fragments(), std::numeric_limits<double>::quiet_NaN());
  used_.resize(plan.fragments());
  held_cache_.resize(plan.fragments());
  params_cache_.resize(plan.fragments());
  if (!state_file_.empty()) files_ = std::make_shared<job_files>(state_file_);
}

result<std::unique_ptr<aggregation>> aggregation::create(aggregation_spec spec, std::vector<float> init,
                                                         std::string state_file, nanos now, std::string grant) {
  if (!valid_job_name(spec.job))
    return make_error(errc::invalid_argument, "job '" + spec.job + "': want 1-64 of [A-Za-z0-9._-]");
  auto plan = make_plan(spec);
  if (!plan) return plan.err();
  if (init.size() != plan->total())
    return make_error(errc::invalid_argument, "job '" + spec.job + "': " + std::to_string(init.size()) +
                                                  " initial values; the model has " + std::to_string(plan->total()));
  auto down = diloco::downlink::unloaded(*plan, spec.codec, spec.error_feedback);
  auto opt = diloco::outer_optimizer::unloaded(*plan, std::vector<std::uint64_t>(plan->fragments(), 0), spec.outer);
  if (!opt) return opt.err();
  auto rounds = job_rounds::make(std::move(*opt), spec.rounds, now);
  if (!rounds) return rounds.err();
  std::unique_ptr<aggregation> a(
      new aggregation(std::move(spec), std::move(*rounds), std::move(down), std::move(state_file)));
  a->grant_ = std::move(grant);
  // One fragment at a time: in memory, written, and out again past the
  // resident bound, so a new job never holds more than init and a fragment.
  const bool momentum = a->spec_.outer.momentum != 0;
  if (a->files_) {
    if (auto r = files::make_dirs(a->dir()); !r) return r.err();
    a->files_->files.resize(plan->fragments());
  }
  for (int p = 0; p < plan->fragments(); ++p) {
    const auto q = static_cast<std::uint32_t>(p);
    fragment_values v;
    v.params.resize(plan->size(p));
    plan->gather(p, init, v.params);
    v.momentum.assign(momentum ? plan->size(p) : 0, 0.0f);
    v.residual.assign(plan->size(p), 0.0f);
    if (auto st = a->take_values(q, std::move(v)); !st) return st.err();
    if (!a->files_) continue;
    auto f = save_fragment(a->dir(), a->source(q));
    if (!f) return f.err();
    a->files_->files[q] = std::move(*f);
    a->make_room(a->spec_.resident_fragments + 1);
  }
  init = std::vector<float>();
  if (a->files_) {
    saved_state h = a->header();
    h.files = a->files_->files;
    if (auto st = save_manifest(a->state_file_, h); !st) return st.err();  // last: it commits them
  }
  return a;
}

result<std::unique_ptr<aggregation>> aggregation::restore(saved_state st, std::string state_file, nanos now) {
  auto plan = make_plan(st.spec);
  if (!plan) return plan.err();
  auto down = diloco::downlink::unloaded(*plan, st.spec.codec);
  auto opt = diloco::outer_optimizer::unloaded(*plan, std::move(st.versions), st.spec.outer);
  if (!opt) return make_error(opt.code(), state_file + ": " + opt.err().message);
  auto rounds = job_rounds::make(std::move(*opt), st.spec.rounds, now);
  if (!rounds) return rounds.err();
  for (const auto& s : st.sites)
    if (auto r = rounds->restore_site(s); !r) return make_error(r.code(), state_file + ": " + r.err().message);
  rounds->restore_stats(st.stats);
  std::unique_ptr<aggregation> a(new aggregation(st.spec, std::move(*rounds), std::move(down), std::move(state_file)));
  const auto frags = static_cast<std::size_t>(plan->fragments());
  if (!st.values.empty() && st.values.size() != frags)
    return make_error(errc::corruption, a->state_file_ + ": " + std::to_string(st.values.size()) +
                                            " fragments' values for " + std::to_string(frags) + " fragments");
  if (st.values.empty() && (!a->files_ || st.files.size() != frags))
    return make_error(errc::internal, a->state_file_ + ": restored without values and without fragment files");
  for (auto& h : st.held)
    if (h.header.fragment < a->last_update_.size()) a->last_update_[h.header.fragment] = std::move(h);
  for (std::size_t p = 0; p < st.theta_norms.size() && p < frags; ++p) a->theta_norm_[p] = st.theta_norms[p];
  for (std::size_t p = 0; p < st.values.size(); ++p)
    if (auto s = a->take_values(static_cast<std::uint32_t>(p), std::move(st.values[p])); !s)
      return make_error(s.code(), a->state_file_ + ": " + s.err().message);
  a->restarts_ = st.restarts + 1;
  a->grant_ = std::move(st.grant);
  if (!a->files_) return a;
  if (st.files.empty()) {  // format 1: every fragment's file, then the manifest in place of state.bin
    if (auto s = a->save_all(); !s) return s.err();
  } else {  // format 2: the files stay; a manifest with the new restart count names them
    a->files_->files = std::move(st.files);
    saved_state h = a->header();
    h.files = a->files_->files;
    if (auto s = save_manifest(a->state_file_, h); !s) return s.err();
  }
  remove_strays(a->state_file_, a->files_->files);
  a->make_room(a->spec_.resident_fragments + 1);
  return a;
}

status aggregation::save_all() {
  if (!files_) return ok_status();  // in memory only
  if (auto r = files::make_dirs(dir()); !r) return r;
  saved_state h = header();
  for (std::uint32_t p = 0; p < saving_.size(); ++p) {
    auto f = save_fragment(dir(), source(p));
    if (!f) return f.err();
    h.files.push_back(std::move(*f));
  }
  if (auto st = save_manifest(state_file_, h); !st) return st;  // last: it commits them
  files_->files = std::move(h.files);
  return ok_status();
}

std::string aggregation::dir() const { return std::filesystem::path(state_file_).parent_path().string(); }

saved_state aggregation::header() const {
  saved_state s;
  s.spec = spec_;
  s.sites = rounds_->sites();
  s.stats = rounds_->stats();
  s.restarts = restarts_;
  s.grant = grant_;
  return s;
}

fragment_source aggregation::source(std::uint32_t p) const {
  const auto& opt = rounds_->optimizer();
  fragment_source f;
  f.job = spec_.job;
  f.fragment = p;
  f.version = opt.version(static_cast<int>(p));
  f.params.push_back(opt.params(static_cast<int>(p)));
  if (!opt.momentum(static_cast<int>(p)).empty()) f.momentum.push_back(opt.momentum(static_cast<int>(p)));
  f.residual = downlink_.residual(static_cast<int>(p));
  f.theta_norm = theta_norm_[p];
  // A delta summed since p's last step is not in the file: the site's last
  // round goes back to what it was, so its re-send is taken.
  for (const auto& site : rounds_->sites()) {
    std::int64_t last = site.last_round[p];
    for (const auto& [id, before] : unsaved_[p])
      if (id == site.id) {
        last = before;  // the first one summed: its "before" is the step's
        break;
      }
    f.last_round.emplace_back(site.id, last);
  }
  f.held = last_update_[p];
  return f;
}

bool aggregation::saves_into(const save_task& t) const { return files_ && t.files == files_; }

std::vector<std::uint64_t> aggregation::versions() const {
  std::vector<std::uint64_t> v;
  for (std::uint32_t p = 0; p < saving_.size(); ++p) v.push_back(published(p));
  return v;
}

result<join_answer> aggregation::join(const std::string& site, const std::string& key_id) {
  if (auto s = rounds_->enrol(site, key_id); !s) return s.err();
  auto versions = rounds_->join(site);
  if (!versions) return versions.err();
  join_answer a{this->versions(), {}};
  for (std::uint32_t p = 0; p < a.versions.size(); ++p) a.last_round.push_back(rounds_->last_round(site, p));
  return a;
}

refusal aggregation::refuse(std::string reason, error e) {
  // job_rounds counts its own reasons; these are decided around it.
  static const std::set<std::string, std::less<>> outside{"bad_header",  "forged_site",     "truncated_frame",
                                                          "bad_payload", "not_granted",     "too_many_tokens",
                                                          "norm_bound"};
  if (outside.count(reason)) ++wire_refusals_[reason];
  return {std::move(reason), std::move(e)};
}

std::optional<refusal> aggregation::out_of_bounds(const delta_meta& d, std::span<const float> values) {
  const std::string where = "delta from site '" + d.site + "' for round " + std::to_string(d.round) +
                            " of fragment " + std::to_string(d.fragment);
  if (spec_.max_delta_tokens > 0 && d.tokens > spec_.max_delta_tokens)
    return refuse("too_many_tokens", make_error(errc::invalid_argument,
                                                where + " claims " + std::to_string(d.tokens) +
                                                    " tokens; the stage trains at most " +
                                                    std::to_string(spec_.max_delta_tokens) +
                                                    " (train.steps x batch x seq_len x grad_accum)"));
  if (values.empty()) return std::nullopt;
  const double norm = l2_norm(values);
  if (!std::isfinite(norm)) return std::nullopt;  // job_rounds refuses it as non_finite, naming the value
  if (std::isnan(theta_norm_[d.fragment]))  // a file written before the header kept ‖θ_p‖
    if (auto s = ensure_loaded(d.fragment); !s) return refuse("state_unreadable", s.err());
  const double theta = theta_norm_[d.fragment], most = max_delta_norm(theta, values.size());
  if (norm > most) {
    char buf[160];
    std::snprintf(buf, sizeof buf, " has norm %.4g; the bound is %.4g (4 x the fragment's norm %.4g + 4 x sqrt(%zu))",
                  norm, most, theta, values.size());
    return refuse("norm_bound", make_error(errc::invalid_argument, where + buf));
  }
  if (theta > 0) max_norm_ratio_ = std::max(max_norm_ratio_, norm / theta);
  max_bound_use_ = std::max(max_bound_use_, norm / most);
  return std::nullopt;
}

std::variant<delta_outcome, refusal> aggregation::submit(const delta_header& h, std::string_view payload,
                                                         const std::string& sender, nanos now) {
  const delta_meta& d = h.meta;
  if (d.site != sender)
    return refuse("forged_site", make_error(errc::permission_denied, "delta claims site '" + d.site +
                                                                         "' but was sent with the key of '" +
                                                                         sender + "'"));
  if (spec_.max_delta_tokens > 0 && d.tokens > spec_.max_delta_tokens)  // before decoding: cheap
    return *out_of_bounds(d, {});
  if (auto s = check_payload(h.payload_bytes, h.payload_sha256, payload); !s)
    return refuse(s.code() == errc::corruption && s.err().message.starts_with("truncated") ? "truncated_frame"
                                                                                            : "bad_payload",
                  make_error(s.code(), "delta from site '" + d.site + "': " + s.err().message));
  const auto& plan = rounds_->optimizer().plan();
  const round_stats before = rounds_->stats();
  auto refused_by_rounds = [&](error e) { return refuse(counted_reason(before, rounds_->stats()), std::move(e)); };
  std::span<const float> values;
  if (d.fragment < static_cast<std::uint32_t>(plan.fragments()) && d.elements == plan.size(d.fragment)) {
    auto head = codec::inspect(as_bytes(payload));
    if (!head) return refuse("bad_payload", make_error(errc::invalid_argument, "delta from site '" + d.site + "': " +
                                                                                 head.err().message));
    if (head->n != d.elements || codec::to_string(head->codec) != h.codec)
      return refuse("bad_payload", make_error(errc::invalid_argument,
                                              "delta from site '" + d.site + "': the payload holds " +
                                                  std::to_string(head->n) + " " +
                                                  std::string(codec::to_string(head->codec)) + " values, the header says " +
                                                  std::to_string(d.elements) + " " + h.codec));
    decoded_.resize(d.elements);
    if (auto s = codec::decode(as_bytes(payload), decoded_); !s)
      return refuse("bad_payload", make_error(errc::invalid_argument, "delta from site '" + d.site + "' for round " +
                                                                         std::to_string(d.round) + ": " +
                                                                         s.err().message));
    values = decoded_;
    if (auto r = out_of_bounds(d, values)) return *r;
  }
  // A wrong fragment or shape reaches job_rounds without values: it refuses
  // and counts it (after the membership checks, so the reason is the first one).
  const std::int64_t prev = rounds_->last_round(d.site, d.fragment);
  auto acc = rounds_->submit(d, values, now);
  if (!acc) return refused_by_rounds(acc.err());
  unsaved_[d.fragment].emplace_back(d.site, prev);
  bytes_in_ += payload.size();
  delta_outcome out{*acc, std::nullopt, 0};
  if (acc->closable && !saving_[d.fragment]) out.closed = close(d.fragment, now);  // else once saved (tick)
  out.version = published(d.fragment);
  return out;
}

close_report aggregation::close(std::uint32_t p, nanos now) {
  close_report r;
  if (auto s = ensure_loaded(p); !s) {  // θ_p's file unreadable: nothing changed, the round stays open
    r.saved = s.err();
    return r;
  }
  const auto& plan = rounds_->optimizer().plan();
  update_.resize(plan.size(p));
  const auto t0 = std::chrono::steady_clock::now();
  auto c = rounds_->close(p, now, update_);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!c) {  // not closable: nothing changed
    r.saved = c.err();
    return r;
  }
  rounds_->record_outer_step(secs);
  r.round = *c;
  r.step_seconds = secs;
  unsaved_[p].clear();

  // Downlink (diloco::downlink): U through error feedback; θ takes back what
  // q did not carry, so it is exactly what the sites hold after applying q.
  correction_.resize(update_.size());
  auto used = downlink_.send(static_cast<int>(p), update_, encoded_, correction_);
  if (!used) {  // U is finite (θ and the deltas are): an internal fault
    r.saved = used.err();
    return r;
  }
  (void)rounds_->correct(p, correction_);
  theta_norm_[p] = l2_norm(rounds_->optimizer().params(static_cast<int>(p)));
  global_update_header h;
  h.job = spec_.job;
  h.fragment = p;
  h.version = c->version;
  h.base_version = c->version - 1;
  h.kind = update_kind::outer_update;
  h.codec = std::string(codec::to_string(*used));
  h.elements = update_.size();
  h.payload_bytes = encoded_.size();
  h.payload_sha256 = crypto::as_view(crypto::sha256(as_chars(encoded_)));
  h.round = c->round;
  h.contributors = static_cast<std::uint32_t>(c->on_time + c->late_folded);
  last_update_[p] = held_update{std::move(h), std::make_shared<const std::string>(as_chars(encoded_))};
  if (!files_) return r;  // in memory only
  auto task = std::make_shared<save_task>(save_task{files_, source(p), header()});
  if (defer_) {
    saving_[p] = 1;
    r.save = std::move(task);
  } else {
    r.saved = run_save(*task);
  }
  return r;
}

std::vector<close_report> aggregation::tick(nanos now) {
  std::vector<close_report> out;
  for (std::uint32_t p : rounds_->closable(now))
    if (!saving_[p]) out.push_back(close(p, now));
  return out;
}

result<pull_answer> aggregation::pull(const std::string& site, std::uint32_t p, std::uint64_t have_version,
                                      bool want_params) {
  const auto& opt = rounds_->optimizer();
  const auto& plan = opt.plan();
  if (p >= static_cast<std::uint32_t>(plan.fragments()))
    return make_error(errc::invalid_argument, "fragment " + std::to_string(p) + " out of range: the job has " +
                                                  std::to_string(plan.fragments()));
  pull_answer a;
  a.version = published(p);
  a.last_round = rounds_->last_round(site, p);
  if (have_version >= a.version && !want_params) return a;
  // θ_p and the held update are already the next version's, which is not
  // published before it is saved: a site that needs them asks again.
  if (saving_[p])
    return make_error(errc::unavailable, "fragment " + std::to_string(p) + ": version " +
                                             std::to_string(a.version + 1) + " is being saved; pull again");
  a.has_update = true;
  const auto& held = last_update_[p];
  if (!want_params && held && held->header.version == a.version && have_version + 1 == a.version) {
    auto payload = held_payload(p);
    if (!payload) return payload.err();
    a.header = held->header;
    a.payload = std::move(*payload);
  } else if (auto kept = params_cache_[p].header.version == a.version ? params_cache_[p].payload.lock() : nullptr) {
    a.header = params_cache_[p].header;  // the same θ_p (a version's θ_p changes only with its close)
    a.payload = std::move(kept);
  } else {  // the parameters the sites hold: θ (it takes back what the downlink did not carry)
    if (auto s = ensure_loaded(p); !s) return s.err();
    const auto part = opt.params(static_cast<int>(p));
    (void)codec::encode_into(codec::codec_id::fp32, part, {}, encoded_);
    a.header = {spec_.job, p, a.version, 0, update_kind::params, "fp32", part.size(), encoded_.size(),
                std::string(crypto::as_view(crypto::sha256(as_chars(encoded_)))), a.version, 0};
    a.payload = std::make_shared<const std::string>(as_chars(encoded_));
    params_cache_[p] = {a.header, a.payload};
  }
  bytes_out_ += a.payload->size();
  return a;
}

}  // namespace loom::aggregator
