#include "services/aggregator/rounds.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

namespace loom::aggregator {
namespace {

error bad_option(std::string what) { return make_error(errc::invalid_argument, "round_options: " + what); }

// The median of v (the mean of the two middle values for an even count). REQUIRES: !v.empty().
double median(std::vector<double> v) {
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + mid) + upper) / 2;
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

}  // namespace

status round_options::validate() const {
  if (!(quorum_fraction > 0 && quorum_fraction <= 1)) return bad_option("quorum_fraction must be in (0, 1]");
  if (quorum_sites < 0) return bad_option("quorum_sites must be >= 0 (0 = use quorum_fraction)");
  if (!(std::isfinite(deadline_k) && deadline_k >= 0)) return bad_option("deadline_k must be finite and >= 0");
  if (!(std::isfinite(deadline_slack) && deadline_slack >= 0))
    return bad_option("deadline_slack must be finite and >= 0");
  if (deadline_min.count() <= 0 || deadline_max < deadline_min)
    return bad_option("deadline_min must be > 0 and <= deadline_max");
  if (deadline_initial < deadline_min || deadline_initial > deadline_max)
    return bad_option("deadline_initial must be within [deadline_min, deadline_max]");
  if (deadline_window < 1) return bad_option("deadline_window must be >= 1");
  if (!(std::isfinite(staleness_power) && staleness_power >= 0))
    return bad_option("staleness_power must be finite and >= 0");
  return ok_status();
}

std::string_view to_string(reject_reason r) {
  switch (r) {
    case reject_reason::unknown_site: return "unknown_site";
    case reject_reason::revoked_site: return "revoked_site";
    case reject_reason::not_joined: return "not_joined";
    case reject_reason::wrong_fragment: return "wrong_fragment";
    case reject_reason::wrong_shape: return "wrong_shape";
    case reject_reason::no_tokens: return "no_tokens";
    case reject_reason::non_finite: return "non_finite";
    case reject_reason::future_round: return "future_round";
    case reject_reason::duplicate: return "duplicate";
    case reject_reason::stale: return "stale";
  }
  return "unknown";
}

std::string_view to_string(site_phase s) {
  switch (s) {
    case site_phase::enrolled: return "enrolled";
    case site_phase::active: return "active";
    case site_phase::left: return "left";
    case site_phase::revoked: return "revoked";
  }
  return "unknown";
}

std::uint64_t round_stats::rejected_total() const {
  std::uint64_t n = 0;
  for (auto r : rejected) n += r;
  return n;
}

job_rounds::job_rounds(diloco::outer_optimizer opt, round_options opts, nanos now)
    : opt_(std::move(opt)), opts_(opts), frags_(opt_.plan().fragments()) {
  for (std::uint32_t p = 0; p < frags_.size(); ++p) open(p, now);
}

result<job_rounds> job_rounds::make(diloco::outer_optimizer optimizer, round_options opts, nanos now) {
  if (auto s = opts.validate(); !s.ok()) return s.err();
  return job_rounds(std::move(optimizer), opts, now);
}

// ---- membership -----------------------------------------------------------

job_rounds::member* job_rounds::find(const std::string& site) {
  auto it = index_.find(site);
  return it == index_.end() ? nullptr : &members_[it->second];
}

status job_rounds::enrol(const std::string& site, const std::string& key_id) {
  if (site.empty() || key_id.empty())
    return make_error(errc::invalid_argument, "enrol: a site needs an id and a public-key id");
  if (member* m = find(site)) {
    if (m->phase == site_phase::revoked)
      return make_error(errc::permission_denied, "site " + quoted(site) + " was revoked and cannot enrol again");
    if (m->key_id != key_id)
      return make_error(errc::already_exists, "site " + quoted(site) + " is enrolled under another key (" +
                                                  m->key_id + ")");
    return ok_status();
  }
  index_.emplace(site, members_.size());
  members_.push_back({site, key_id, site_phase::enrolled, 0,
                      std::vector<std::int64_t>(opt_.plan().fragments(), -1)});
  return ok_status();
}

result<std::vector<std::uint64_t>> job_rounds::join(const std::string& site) {
  member* m = find(site);
  if (!m) return make_error(errc::not_found, "site " + quoted(site) + " is not enrolled: enrol it with a token first");
  if (m->phase == site_phase::revoked)
    return make_error(errc::permission_denied, "site " + quoted(site) + " is revoked");
  m->phase = site_phase::active;
  return opt_.versions();
}

status job_rounds::leave(const std::string& site) {
  member* m = find(site);
  if (!m) return make_error(errc::not_found, "site " + quoted(site) + " is not enrolled");
  if (m->phase != site_phase::active)
    return make_error(errc::conflict, "site " + quoted(site) + " is " + std::string(to_string(m->phase)) +
                                          ", not active");
  m->phase = site_phase::left;
  return ok_status();
}

status job_rounds::revoke(const std::string& site) {
  member* m = find(site);
  if (!m) return make_error(errc::not_found, "site " + quoted(site) + " is not enrolled");
  m->phase = site_phase::revoked;
  return ok_status();
}

std::vector<site_view> job_rounds::sites() const {
  std::vector<site_view> out;
  for (const auto& m : members_) out.push_back({m.id, m.key_id, m.phase, m.accepted, m.last_round});
  return out;
}

status job_rounds::restore_site(const site_view& s) {
  if (s.id.empty() || s.key_id.empty() || s.last_round.size() != frags_.size())
    return make_error(errc::invalid_argument, "restore_site: site " + quoted(s.id) +
                                                  " needs an id, a key id and one last round per fragment");
  if (find(s.id)) return make_error(errc::already_exists, "restore_site: site " + quoted(s.id) + " exists");
  index_.emplace(s.id, members_.size());
  members_.push_back({s.id, s.key_id, s.phase, s.accepted, s.last_round});
  return ok_status();
}

std::int64_t job_rounds::last_round(const std::string& site, std::uint32_t p) const {
  auto it = index_.find(site);
  if (it == index_.end() || p >= frags_.size()) return -1;
  return members_[it->second].last_round[p];
}

int job_rounds::active_sites() const {
  return static_cast<int>(std::count_if(members_.begin(), members_.end(),
                                        [](const member& m) { return m.phase == site_phase::active; }));
}

int job_rounds::quorum() const {
  const int active = active_sites();
  const int want = opts_.quorum_sites > 0 ? std::min(opts_.quorum_sites, active)
                                          : static_cast<int>(std::ceil(opts_.quorum_fraction * active - 1e-9));
  return std::max(1, want);
}

// ---- deltas ---------------------------------------------------------------

error job_rounds::reject(reject_reason why, errc code, std::string message) {
  ++stats_.rejected[static_cast<int>(why)];
  return make_error(code, std::move(message));
}

result<accepted> job_rounds::submit(const delta_meta& d, std::span<const float> values, nanos now) {
  using R = reject_reason;
  const std::string who = "delta from site " + quoted(d.site);
  member* m = find(d.site);
  if (!m) return reject(R::unknown_site, errc::not_found, who + ": no such site is enrolled");
  if (m->phase == site_phase::revoked)
    return reject(R::revoked_site, errc::permission_denied, who + ": the site is revoked");
  if (m->phase != site_phase::active)
    return reject(R::not_joined, errc::conflict,
                  who + ": the site is " + std::string(to_string(m->phase)) + ", not active; join the job first");
  const auto& plan = opt_.plan();
  if (d.fragment >= static_cast<std::uint32_t>(plan.fragments()))
    return reject(R::wrong_fragment, errc::invalid_argument,
                  who + " names fragment " + std::to_string(d.fragment) + "; the job has " +
                      std::to_string(plan.fragments()) + " (0-" + std::to_string(plan.fragments() - 1) + ")");
  const std::uint32_t p = d.fragment;
  const std::string where = who + " for round " + std::to_string(d.round) + " of fragment " + std::to_string(p);
  // Say what differs: the header's count (whose payload is then not
  // decoded at all), or the values received against it.
  if (d.elements != plan.size(p))
    return reject(R::wrong_shape, errc::invalid_argument,
                  where + " declares " + std::to_string(d.elements) + " values; the fragment has " +
                      std::to_string(plan.size(p)));
  if (values.size() != d.elements)
    return reject(R::wrong_shape, errc::invalid_argument,
                  where + " carries " + std::to_string(values.size()) + " values; its header declares " +
                      std::to_string(d.elements));
  if (d.tokens == 0)
    return reject(R::no_tokens, errc::invalid_argument,
                  where + " reports 0 tokens; its weight is the tokens trained since its base version");
  const std::uint64_t open_now = open_round(p);
  if (d.round > open_now)
    return reject(R::future_round, errc::invalid_argument,
                  where + " is from the future: round " + std::to_string(open_now) + " is open");
  if (d.base_version > d.round)
    return reject(R::future_round, errc::invalid_argument,
                  where + " claims base version " + std::to_string(d.base_version) + ", newer than its round");
  if (static_cast<std::int64_t>(d.round) <= m->last_round[p])
    return reject(R::duplicate, errc::already_exists,
                  where + ": the site already sent round " + std::to_string(m->last_round[p]) + " of this fragment");
  const std::uint64_t staleness = open_now - d.base_version;
  if (staleness > opts_.staleness_bound)
    return reject(R::stale, errc::deadline_exceeded,
                  where + " was computed from version " + std::to_string(d.base_version) + ", " +
                      std::to_string(staleness) + " behind the open round " + std::to_string(open_now) + " (bound " +
                      std::to_string(opts_.staleness_bound) + "): dropped; pull the current global parameters");
  if (auto i = diloco::first_non_finite(values))
    return reject(R::non_finite, errc::invalid_argument,
                  where + " has " + (std::isnan(values[*i]) ? "NaN" : "an infinity") + " at index " +
                      std::to_string(*i));

  const double weight =
      static_cast<double>(d.tokens) / std::pow(1.0 + static_cast<double>(staleness), opts_.staleness_power);
  if (auto s = opt_.accumulate(static_cast<int>(p), weight, values); !s.ok()) return s.err();  // checked above
  m->last_round[p] = static_cast<std::int64_t>(d.round);
  ++m->accepted;
  auto& f = frags_[p];
  const bool late = d.round < open_now;
  if (late) {
    ++f.late;
    ++stats_.late_folded;
  } else {
    ++f.on_time;
    ++stats_.arrivals;
  }
  observe(p, d.round, now);
  return accepted{late, open_now, staleness, weight, closable(p, now)};
}

// ---- closing --------------------------------------------------------------

bool job_rounds::closable(std::uint32_t p, nanos now) const {
  const auto& f = frags_[p];
  return f.on_time >= quorum() || (now >= f.deadline && f.on_time + f.late > 0);
}

std::vector<std::uint32_t> job_rounds::closable(nanos now) const {
  std::vector<std::uint32_t> out;
  for (std::uint32_t p = 0; p < frags_.size(); ++p)
    if (closable(p, now)) out.push_back(p);
  return out;
}

std::optional<nanos> job_rounds::next_deadline() const {
  std::optional<nanos> next;
  for (const auto& f : frags_)
    if (f.on_time + f.late > 0 && (!next || f.deadline < *next)) next = f.deadline;
  return next;
}

result<closed_round> job_rounds::close(std::uint32_t p, nanos now, std::span<float> update_out) {
  if (p >= frags_.size())
    return make_error(errc::invalid_argument, "close: fragment " + std::to_string(p) + " out of range");
  const auto& f = frags_[p];
  const std::uint64_t round = open_round(p);
  if (f.on_time + f.late == 0)
    return make_error(errc::conflict, "close: round " + std::to_string(round) + " of fragment " +
                                          std::to_string(p) + " holds no delta");
  const bool by_quorum = f.on_time >= quorum();
  auto step = opt_.step(static_cast<int>(p), update_out);
  if (!step.ok()) return step.err();
  closed_round c{p, round, step->version, f.on_time, f.late, step->weight, by_quorum, f.opened, now};
  ++stats_.rounds_closed;
  ++(by_quorum ? stats_.closed_by_quorum : stats_.closed_by_deadline);
  stats_.last_quorum_size = f.on_time;
  open(p, now);
  return c;
}

void job_rounds::record_outer_step(double seconds) {
  stats_.last_outer_step_s = seconds;
  stats_.max_outer_step_s = std::max(stats_.max_outer_step_s, seconds);
  stats_.total_outer_step_s += seconds;
}

// ---- deadlines ------------------------------------------------------------

void job_rounds::open(std::uint32_t p, nanos now) {
  auto& f = frags_[p];
  f.opened = now;
  f.deadline = now + planned_delay(f);
  f.on_time = f.late = 0;
  f.recent_opens.push_back(now);
  if (f.recent_opens.size() > opts_.staleness_bound + 1) f.recent_opens.erase(f.recent_opens.begin());
}

nanos job_rounds::planned_delay(const fragment_state& f) const {
  if (f.delays.empty()) return opts_.deadline_initial;
  std::vector<double> d;
  for (auto x : f.delays) d.push_back(static_cast<double>(x.count()));
  const double med = median(d);
  for (auto& x : d) x = std::abs(x - med);
  const double sigma = 1.4826 * median(d);
  const double delay = med + std::max(opts_.deadline_k * sigma, opts_.deadline_slack * med);
  const auto n = nanos(static_cast<std::int64_t>(std::llround(delay)));
  return std::clamp(n, opts_.deadline_min, opts_.deadline_max);
}

// Records how long after its round opened a delta arrived (when that round's
// opening is still remembered: the last S+1 rounds).
void job_rounds::observe(std::uint32_t p, std::uint64_t round, nanos now) {
  auto& f = frags_[p];
  const std::uint64_t behind = open_round(p) - round;
  if (behind >= f.recent_opens.size()) return;
  const nanos delay = now - f.recent_opens[f.recent_opens.size() - 1 - behind];
  if (f.delays.size() < static_cast<std::size_t>(opts_.deadline_window)) {
    f.delays.push_back(delay);
  } else {
    f.delays[f.next_delay] = delay;
    f.next_delay = (f.next_delay + 1) % f.delays.size();
  }
}

}  // namespace loom::aggregator
