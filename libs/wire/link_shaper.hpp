// link_shaper: a pure, deterministic model of ONE direction of a network
// link, for weak-network emulation inside the transport (issue #15 item 5;
// the kernel has no netem). Given when a message of N bytes is handed to the
// link, it says when it arrives, or that it is lost and why. It never reads a
// clock: time is passed in as link_time (nanoseconds since the link started).
//
// Model, applied in this order to each admitted message:
//   1. outage   - admitted while the link is down, or still on the wire
//                 ([now, deliver_at]) when a window starts -> dropped "outage".
//                 Both directions of a link built from one config share the
//                 outage schedule (it depends on the seed only).
//   2. bandwidth - token bucket with debt: tokens accrue at `bandwidth` B/s up
//                 to `burst`; a message takes its size in tokens (the count
//                 may go negative); it has left the sender once the debt is
//                 paid: tx_done = now + max(0, -tokens) / bandwidth.
//   3. latency + jitter - deliver_at = tx_done + max(0, latency + j), j
//                 uniform in [-jitter, +jitter] or normal(0, jitter).
//                 deliver_at is then raised to the previous message's, so the
//                 link is FIFO: jitter bunches messages, it never reorders them.
//   4. loss     - Gilbert-Elliott two-state chain, stepped once per message:
//                 good -> bad with p, bad -> good with r, lost with
//                 loss_in_good / loss_in_bad in the new state -> dropped "loss".
// A message is lost whole (ZeroMQ over TCP either delivers a message or, when
// the connection dies, never does): the protocol above must retry.
// Determinism: the n-th message's jitter and loss depend only on (seed,
// stream, n); outages only on (seed, time). Value type; one owner; not thread-safe.
#pragma once

#include "libs/status/status.hpp"
#include "libs/wire/link_outages.hpp"
#include "libs/wire/link_random.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace loom::wire {

enum class jitter_dist { uniform, normal };

// Gilbert-Elliott loss. The defaults lose nothing.
struct gilbert_elliott {
  double p_good_to_bad = 0.0;
  double p_bad_to_good = 1.0;
  double loss_in_good = 0.0;
  double loss_in_bad = 1.0;
  bool operator==(const gilbert_elliott&) const = default;

  // Simple Gilbert (no loss in good, all lost in bad) with stationary loss
  // rate `rate` in [0, 1) and mean run of consecutive losses `mean_burst`
  // (r = 1 / mean_burst, p = rate r / (1 - rate)). mean_burst = 1 / (1 - rate)
  // gives independent (Bernoulli) losses. invalid_argument when out of range.
  static result<gilbert_elliott> from_rate(double rate, double mean_burst);
  // Long-run fraction of messages lost.
  double stationary_loss() const;
};

struct link_config {
  double bandwidth = 0.0;    // bytes per second; 0 = unlimited
  double burst_bytes = 0.0;  // token bucket depth; 0 = default_burst(bandwidth)
  link_time latency{0};      // one-way, added to every delivered message
  link_time jitter{0};
  jitter_dist jitter_shape = jitter_dist::uniform;
  gilbert_elliott loss;
  std::vector<outage_window> outages;        // fixed windows since the link's start
  std::optional<outage_generator> outage_gen;
  std::uint64_t seed = 0;
  bool operator==(const link_config&) const = default;

  // True when the link differs from a perfect one (then it is worth shaping).
  bool shapes() const;
};

// 10 ms of line rate, at least 16 KiB: like tc-tbf's burst >= rate/HZ, a
// small request crosses an idle link without a serialisation delay while a
// bulk transfer is held to the rate.
double default_burst(double bandwidth);

// Strict check (used by the spec parser): invalid_argument naming the field.
status validate(const link_config& c);

enum class drop_reason { none, loss, outage };
std::string_view to_string(drop_reason r);

struct admission {
  link_time deliver_at{0};  // meaningful when !dropped
  bool dropped = false;
  drop_reason reason = drop_reason::none;
};

class link_shaper {
 public:
  // `stream` separates directions (or links) sharing a config: uplink 0,
  // downlink 1 get independent jitter and loss but the same outages.
  // Out-of-range values are normalised, not rejected (negative times -> 0,
  // probabilities clamped to [0, 1], an invalid generator dropped); run
  // validate() first to reject them instead.
  explicit link_shaper(link_config c, std::uint64_t stream = 0);

  // Hands `bytes` to the link at `now`. `now` earlier than a previous call is
  // taken as that call's time (the model only moves forward).
  admission admit(link_time now, std::uint64_t bytes);

  const link_config& config() const { return cfg_; }
  std::uint64_t admitted() const { return admitted_; }
  std::uint64_t dropped_loss() const { return dropped_loss_; }
  std::uint64_t dropped_outage() const { return dropped_outage_; }
  std::uint64_t bytes_admitted() const { return bytes_admitted_; }

 private:
  link_time jitter_sample();
  bool lost();  // steps the Gilbert-Elliott chain

  link_config cfg_;
  double burst_;
  outage_schedule outages_;
  link_random loss_rng_, jitter_rng_;
  bool bad_state_ = false;
  double tokens_;             // bytes; negative = debt
  link_time last_now_{0};     // time tokens_ was last refilled to
  link_time last_deliver_{0}; // FIFO floor
  std::uint64_t admitted_ = 0, dropped_loss_ = 0, dropped_outage_ = 0, bytes_admitted_ = 0;
};

}  // namespace loom::wire
