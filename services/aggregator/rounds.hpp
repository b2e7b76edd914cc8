// rounds: the aggregator's round state machine for one DiLoCo job — pure
// logic (no CAF, no ZeroMQ, no clock: the caller passes `now`). It owns the
// job's outer optimizer (one copy of the global parameters and momentum) and:
//   membership  sites enrol (id, public-key id), join, leave, are revoked;
//               a joining or returning site is told the current versions;
//   rounds      per fragment p, round r is open until its quorum of active
//               sites has sent a delta, or its adaptive deadline has passed
//               with at least one delta; closing runs the outer step and
//               publishes version r+1 (so the open round == the version);
//   late        a delta for a closed round is folded into the open one with
//               a staleness discount, or dropped past the bound S;
//   bad input   rejected with errc + message and counted; the round goes on.
// The lifecycle is drawn in README.md. Owned by the job's actor; not thread-safe.
#pragma once

#include "libs/diloco/outer_optimizer.hpp"
#include "libs/status/status.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::aggregator {

// Time since an arbitrary epoch (the caller's steady clock).
using nanos = std::chrono::nanoseconds;

struct round_options {
  double quorum_fraction = 1.0;  // close once this share of the active sites sent (rounded up)
  int quorum_sites = 0;          // > 0: this many instead (capped at the active sites)
  // Deadline of a round, from its opening: median + max(k·σ̂, slack·median) of
  // the last `deadline_window` arrival delays (σ̂ = 1.4826·MAD, the normal
  // consistent MAD), clamped to [min, max]; `initial` before any arrival.
  // k = 3 lets ~99.9% of a normal spread of arrivals in; the slack keeps a
  // margin when every site arrives at the same instant (MAD = 0).
  double deadline_k = 3.0;
  double deadline_slack = 0.25;
  nanos deadline_min = std::chrono::seconds(1);     // below this, noise on a LAN closes rounds early
  nanos deadline_max = std::chrono::minutes(10);    // a round never waits longer for anyone
  nanos deadline_initial = std::chrono::minutes(2); // first round: H inner steps of an unknown model
  int deadline_window = 32;  // samples per fragment: a few rounds of a few sites
  // A delta computed from version b and arriving while round R is open has
  // staleness s = R − b; it is used with weight tokens / (1 + s)^power if
  // s <= staleness_bound, else dropped.
  std::uint64_t staleness_bound = 2;
  double staleness_power = 1.0;

  status validate() const;  // invalid_argument naming the field
};

// Why a delta was refused (each counted in round_stats::rejected).
enum class reject_reason : int {
  unknown_site,    // not_found: no such site enrolled
  revoked_site,    // permission_denied
  not_joined,      // conflict: enrolled but not joined, or has left
  wrong_fragment,  // invalid_argument: fragment >= P
  wrong_shape,     // invalid_argument: element count != the fragment's size
  no_tokens,       // invalid_argument: weight 0
  non_finite,      // invalid_argument: a NaN or ±Inf value
  future_round,    // invalid_argument: round or base version beyond the open round
  duplicate,       // already_exists: the site already sent this fragment's round
  stale,           // deadline_exceeded: staleness > S; this is the "late, dropped" count
};
inline constexpr int reject_reason_count = 10;
std::string_view to_string(reject_reason r);

// What a delta claims (the header's fields; values travel beside it).
struct delta_meta {
  std::string site;
  std::uint64_t round = 0;         // the round it was sent for
  std::uint32_t fragment = 0;
  std::uint64_t base_version = 0;  // the version of the anchor it was computed against
  std::uint64_t elements = 0;      // fp32 values, once decoded
  std::uint64_t tokens = 0;        // tokens trained on since base_version: its weight
};

struct accepted {
  bool late = false;            // for a closed round, folded into the open one
  std::uint64_t round = 0;      // the round it counts in (the open round)
  std::uint64_t staleness = 0;  // open round − base_version
  double weight = 0;            // tokens, discounted for staleness
  bool closable = false;        // the fragment's round may close now (quorum, or deadline passed)
};

struct closed_round {
  std::uint32_t fragment = 0;
  std::uint64_t round = 0;    // the round closed
  std::uint64_t version = 0;  // the version published (round + 1)
  int on_time = 0;            // sites whose delta was for this round
  int late_folded = 0;        // late deltas folded in
  double weight = 0;
  bool by_quorum = false;     // false: by deadline
  nanos opened{}, closed{};
};

struct round_stats {
  std::uint64_t rounds_closed = 0, closed_by_quorum = 0, closed_by_deadline = 0;
  int last_quorum_size = 0;        // on-time sites in the last closed round
  std::uint64_t arrivals = 0;      // deltas accepted for their own round
  std::uint64_t late_folded = 0;   // deltas accepted for a later round
  std::array<std::uint64_t, reject_reason_count> rejected{};
  double last_outer_step_s = 0, max_outer_step_s = 0, total_outer_step_s = 0;

  std::uint64_t late_dropped() const { return rejected[static_cast<int>(reject_reason::stale)]; }
  std::uint64_t rejected_total() const;
};

enum class site_phase { enrolled, active, left, revoked };
std::string_view to_string(site_phase s);

struct site_view {
  std::string id, key_id;
  site_phase phase = site_phase::enrolled;
  std::uint64_t accepted = 0;  // deltas accepted from it
  std::vector<std::int64_t> last_round;  // per fragment: the last round it sent (-1 none)
};

class job_rounds {
 public:
  // Round 0 of every fragment opens at `now`. invalid_argument on bad options.
  static result<job_rounds> make(diloco::outer_optimizer optimizer, round_options opts, nanos now);

  // Membership. enrol: already_exists for a known id under another key (the
  // same key again is fine); a revoked id cannot enrol again.
  status enrol(const std::string& site, const std::string& key_id);
  // Makes an enrolled or departed site active. Returns the versions it must
  // start from (the current global parameters; its next delta for fragment p
  // is for round versions[p]). not_found / permission_denied as for deltas.
  result<std::vector<std::uint64_t>> join(const std::string& site);
  status leave(const std::string& site);   // active -> left; no longer counted in quorums
  status revoke(const std::string& site);  // for good: its deltas are refused from now on
  std::vector<site_view> sites() const;    // in enrolment order
  // A job reloaded from disk: a member as sites() showed it (last_round one
  // entry per fragment), and the counters. invalid_argument / already_exists.
  status restore_site(const site_view& s);
  void restore_stats(const round_stats& s) { stats_ = s; }
  // The last round `site` sent for fragment p, -1 for none or an unknown site.
  std::int64_t last_round(const std::string& site, std::uint32_t p) const;
  int active_sites() const;

  // A site's delta for one fragment. Accepted: summed into the open round of
  // its fragment. Otherwise the error names what was wrong and it is counted.
  result<accepted> submit(const delta_meta& d, std::span<const float> values, nanos now);

  // Whether fragment p's open round may close at `now`: its quorum of sites
  // sent, or its deadline passed with at least one delta (on time or late).
  // REQUIRES: p < fragments. The second form lists them, in fragment order.
  bool closable(std::uint32_t p, nanos now) const;
  std::vector<std::uint32_t> closable(nanos now) const;
  // When the next round could close by deadline (for the caller's timer):
  // the earliest deadline of a round holding at least one delta.
  std::optional<nanos> next_deadline() const;
  // Closes fragment p's open round, closable or not (the caller asks
  // closable() first): the outer step (U into update_out when given),
  // version + 1, and the next round opens at `now`.
  // conflict if the round holds no delta, invalid_argument for a bad p.
  result<closed_round> close(std::uint32_t p, nanos now, std::span<float> update_out = {});
  // The outer step's duration as the caller measured it around close().
  void record_outer_step(double seconds);

  const diloco::outer_optimizer& optimizer() const { return opt_; }
  // θ_p += add: the part of fragment p's last update the downlink did not
  // carry (diloco::outer_optimizer::correct).
  status correct(std::uint32_t p, std::span<const float> add) { return opt_.correct(static_cast<int>(p), add); }
  // θ_p and m_p in and out of memory (diloco::outer_optimizer::load/unload):
  // the aggregation keeps them in the fragment's file while p is not in use.
  status load(std::uint32_t p, std::vector<float> theta, std::vector<float> m) {
    return opt_.load(static_cast<int>(p), std::move(theta), std::move(m));
  }
  std::pair<std::vector<float>, std::vector<float>> unload(std::uint32_t p) { return opt_.unload(static_cast<int>(p)); }
  std::uint64_t open_round(std::uint32_t p) const { return opt_.version(p); }
  nanos opened(std::uint32_t p) const { return frags_[p].opened; }
  nanos deadline(std::uint32_t p) const { return frags_[p].deadline; }
  int quorum() const;  // sites needed to close by quorum now
  int on_time(std::uint32_t p) const { return frags_[p].on_time; }
  const round_stats& stats() const { return stats_; }

 private:
  struct member {
    std::string id, key_id;
    site_phase phase = site_phase::enrolled;
    std::uint64_t accepted = 0;
    std::vector<std::int64_t> last_round;  // per fragment, -1 = none yet
  };
  struct fragment_state {
    nanos opened{}, deadline{};
    int on_time = 0, late = 0;
    std::vector<nanos> recent_opens;  // opening times of the last S+1 rounds, newest last
    std::vector<nanos> delays;        // ring of arrival delays (deadline_window)
    std::size_t next_delay = 0;
  };
  job_rounds(diloco::outer_optimizer opt, round_options opts, nanos now);
  error reject(reject_reason why, errc code, std::string message);
  void open(std::uint32_t p, nanos now);
  nanos planned_delay(const fragment_state& f) const;
  void observe(std::uint32_t p, std::uint64_t round, nanos now);
  member* find(const std::string& site);

  diloco::outer_optimizer opt_;
  round_options opts_;
  std::vector<member> members_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<fragment_state> frags_;
  round_stats stats_;
};

}  // namespace loom::aggregator
