// link_monitor: what we know about the link to each peer (a site, the cloud),
// learnt from exchanges the caller observed: RTT (smoothed, variation,
// windowed minimum), a bandwidth estimate, last contact, and a state
// (unknown / up / degraded / down) with its reason. `loom site list` shows it;
// codec choice reads bandwidth_bytes_per_s. Pure: every time is passed in (any
// monotonic epoch, the same for all calls). Not thread-safe: one owner (the
// actor or thread that makes the exchanges) feeds and reads it.
#pragma once

#include "libs/wire/link_outages.hpp"  // link_time

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::wire {

// One request/reply exchange, or one whole transfer (first byte sent ->
// last ack), as the caller saw it.
struct link_observation {
  link_time sent{0};     // request handed to the socket
  link_time replied{0};  // reply received; when !ok, when we gave up
  std::uint64_t bytes_out = 0;
  std::uint64_t bytes_in = 0;
  bool ok = true;  // false: no reply (timeout, reconnect)
};

// Thresholds, with the reasons for their defaults.
struct link_thresholds {
  // Down after this long without a reply: three missed 5 s heartbeats.
  std::chrono::seconds down_after{15};
  // Down after this many unanswered exchanges in a row, however recent the
  // last contact: one miss is noise, three is a cut (Lazy Pirate gives up after 3).
  int down_failures = 3;
  // Degraded: no reply for this long (one heartbeat and a half).
  std::chrono::milliseconds degraded_after{7500};
  // Degraded above this smoothed RTT: the far end of the WAN range the
  // research plans for (20-300 ms), with margin.
  std::chrono::milliseconds degraded_rtt{500};
  // Degraded below this bandwidth (1 Mbit/s): an int8 delta of a 10M-param
  // model (10 MB) would take 80 s, longer than a typical outer round.
  double degraded_bandwidth = 125'000.0;
  // Degraded when more than this fraction of the last `window` exchanges failed.
  double degraded_failure_ratio = 0.1;
  int window = 20;
  // Exchanges at or below this many bytes (both ways) give RTT samples: their
  // transfer time is small next to the RTT. Larger ones give bandwidth samples
  // once at least `bandwidth_min_bytes` long (shorter ones are all latency).
  std::uint64_t rtt_max_bytes = 16 * 1024;
  std::uint64_t bandwidth_min_bytes = 256 * 1024;
  // The minimum RTT forgets samples older than this (routes change; BBR uses 10 s
  // for packets, we see one exchange per second or so).
  std::chrono::seconds min_rtt_window{60};
};

enum class link_state { unknown, up, degraded, down };
std::string_view to_string(link_state s);

struct link_estimate {
  link_state state = link_state::unknown;
  std::string reason;                   // why degraded/down; "" when up
  std::optional<link_time> srtt;        // EWMA, gain 1/8 (RFC 6298)
  std::optional<link_time> rttvar;      // mean deviation, gain 1/4 (RFC 6298)
  std::optional<link_time> min_rtt;     // over min_rtt_window
  std::optional<double> bandwidth_bytes_per_s;  // EWMA of samples, gain 1/4
  std::optional<link_time> last_contact;        // last reply received
  std::uint64_t exchanges = 0, failures = 0;
  int consecutive_failures = 0;
  double recent_failure_ratio = 0.0;  // over the last `window` exchanges
};

// The estimate of one link.
class link_estimator {
 public:
  explicit link_estimator(link_thresholds t = {}) : t_(t) {}

  void observe(const link_observation& o);
  // The estimate as of `now` (state depends on how long ago the last reply was).
  link_estimate estimate(link_time now) const;

 private:
  void add_rtt(link_time at, link_time rtt);

  link_thresholds t_;
  link_estimate e_;
  std::deque<std::pair<link_time, link_time>> min_window_;  // (when, rtt), rtt increasing
  std::deque<bool> recent_;                                  // true = failed
};

// Estimates per peer name.
class link_monitor {
 public:
  explicit link_monitor(link_thresholds t = {}) : t_(t) {}

  void observe(const std::string& peer, const link_observation& o);
  // unknown state when the peer was never observed.
  link_estimate estimate(const std::string& peer, link_time now) const;
  std::vector<std::string> peers() const;

 private:
  link_thresholds t_;
  std::map<std::string, link_estimator> links_;
};

}  // namespace loom::wire
