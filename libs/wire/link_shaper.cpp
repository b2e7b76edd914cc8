#include "libs/wire/link_shaper.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace loom::wire {
namespace {

// Streams of one seed: loss and jitter per direction; outages have their own.
constexpr std::uint64_t loss_stream = 0x6c6f737300000000ULL;    // "loss"
constexpr std::uint64_t jitter_stream = 0x6a69747400000000ULL;  // "jitt"

double clamp01(double p) { return std::isnan(p) ? 0.0 : std::clamp(p, 0.0, 1.0); }

bool probability(double p) { return p >= 0.0 && p <= 1.0; }

link_config normalised(link_config c) {
  if (!(c.bandwidth > 0.0) || !std::isfinite(c.bandwidth)) c.bandwidth = 0.0;
  if (!(c.burst_bytes > 0.0) || !std::isfinite(c.burst_bytes)) c.burst_bytes = 0.0;
  c.latency = std::max(c.latency, link_time(0));
  c.jitter = std::max(c.jitter, link_time(0));
  c.loss.p_good_to_bad = clamp01(c.loss.p_good_to_bad);
  c.loss.p_bad_to_good = clamp01(c.loss.p_bad_to_good);
  c.loss.loss_in_good = clamp01(c.loss.loss_in_good);
  c.loss.loss_in_bad = clamp01(c.loss.loss_in_bad);
  return c;
}

double seconds(link_time t) { return std::chrono::duration<double>(t).count(); }

link_time from_seconds(double s) {
  return std::chrono::duration_cast<link_time>(std::chrono::duration<double>(s));
}

}  // namespace

result<gilbert_elliott> gilbert_elliott::from_rate(double rate, double mean_burst) {
  if (!(rate >= 0.0 && rate < 1.0))
    return make_error(errc::invalid_argument, "loss rate must be in [0, 1), got " + std::to_string(rate));
  if (!(mean_burst >= 1.0) || !std::isfinite(mean_burst))
    return make_error(errc::invalid_argument,
                      "mean loss burst must be at least 1 message, got " + std::to_string(mean_burst));
  gilbert_elliott g;
  g.p_bad_to_good = 1.0 / mean_burst;
  g.p_good_to_bad = rate * g.p_bad_to_good / (1.0 - rate);
  if (g.p_good_to_bad > 1.0)
    return make_error(errc::invalid_argument, "mean loss burst " + std::to_string(mean_burst) +
                                                  " is too short for loss rate " + std::to_string(rate) +
                                                  " (needs at least rate / (1 - rate))");
  return g;
}

double gilbert_elliott::stationary_loss() const {
  const double s = p_good_to_bad + p_bad_to_good;
  const double in_bad = s > 0.0 ? p_good_to_bad / s : 0.0;  // s == 0: the chain never leaves good
  return (1.0 - in_bad) * loss_in_good + in_bad * loss_in_bad;
}

bool link_config::shapes() const {
  return bandwidth > 0.0 || latency > link_time(0) || jitter > link_time(0) || loss.stationary_loss() > 0.0 ||
         loss.loss_in_good > 0.0 || !outages.empty() || outage_gen.has_value();
}

double default_burst(double bandwidth) { return std::max(16.0 * 1024.0, bandwidth * 0.010); }

status validate(const link_config& c) {
  if (!(c.bandwidth >= 0.0) || !std::isfinite(c.bandwidth))
    return make_error(errc::invalid_argument, "bandwidth must be a finite number >= 0 (0 = unlimited)");
  if (!(c.burst_bytes >= 0.0) || !std::isfinite(c.burst_bytes))
    return make_error(errc::invalid_argument, "burst must be a finite number of bytes >= 0");
  if (c.burst_bytes > 0.0 && c.bandwidth == 0.0)
    return make_error(errc::invalid_argument, "burst given without a bandwidth");
  if (c.latency < link_time(0)) return make_error(errc::invalid_argument, "latency must be >= 0");
  if (c.jitter < link_time(0)) return make_error(errc::invalid_argument, "jitter must be >= 0");
  const auto& g = c.loss;
  if (!probability(g.p_good_to_bad) || !probability(g.p_bad_to_good) || !probability(g.loss_in_good) ||
      !probability(g.loss_in_bad))
    return make_error(errc::invalid_argument, "Gilbert-Elliott probabilities must be in [0, 1]");
  for (const auto& w : c.outages)
    if (auto st = validate(w); !st.ok()) return st;
  if (c.outage_gen)
    if (auto st = validate(*c.outage_gen); !st.ok()) return st;
  return ok_status();
}

std::string_view to_string(drop_reason r) {
  switch (r) {
    case drop_reason::none: return "none";
    case drop_reason::loss: return "loss";
    case drop_reason::outage: return "outage";
  }
  return "unknown";
}

link_shaper::link_shaper(link_config c, std::uint64_t stream)
    : cfg_(normalised(std::move(c))),
      burst_(cfg_.burst_bytes > 0.0 ? cfg_.burst_bytes : default_burst(cfg_.bandwidth)),
      outages_(cfg_.outages, cfg_.outage_gen, cfg_.seed),
      loss_rng_(cfg_.seed, loss_stream + stream),
      jitter_rng_(cfg_.seed, jitter_stream + stream),
      tokens_(burst_) {}

link_time link_shaper::jitter_sample() {
  if (cfg_.jitter <= link_time(0)) return link_time(0);
  const double j = seconds(cfg_.jitter);
  return from_seconds(cfg_.jitter_shape == jitter_dist::normal ? j * jitter_rng_.normal()
                                                               : jitter_rng_.uniform(-j, j));
}

bool link_shaper::lost() {
  const auto& g = cfg_.loss;
  if (g.p_good_to_bad == 0.0 && g.loss_in_good == 0.0 && !bad_state_) return false;  // no draws: loss off
  const double step = loss_rng_.uniform();
  bad_state_ = bad_state_ ? step >= g.p_bad_to_good : step < g.p_good_to_bad;
  return loss_rng_.uniform() < (bad_state_ ? g.loss_in_bad : g.loss_in_good);
}

admission link_shaper::admit(link_time now, std::uint64_t bytes) {
  now = std::max(now, last_now_);
  ++admitted_;
  bytes_admitted_ += bytes;
  // Draw this message's random numbers first, whatever happens to it, so
  // the n-th message's fate does not depend on what befell earlier ones.
  const bool lose = lost();
  const link_time jitter = jitter_sample();

  // An outage since the last message cut whatever was queued: its debt is gone.
  if (outages_.first_overlap(last_now_, now)) {
    tokens_ = burst_;
  } else if (cfg_.bandwidth > 0.0) {
    tokens_ = std::min(burst_, tokens_ + cfg_.bandwidth * seconds(now - last_now_));
  }
  last_now_ = now;
  if (outages_.down_at(now)) {
    ++dropped_outage_;
    return {now, true, drop_reason::outage};
  }

  link_time tx_done = now;
  if (cfg_.bandwidth > 0.0) {
    tokens_ -= static_cast<double>(bytes);
    if (tokens_ < 0.0) tx_done += from_seconds(-tokens_ / cfg_.bandwidth);
  }
  const link_time deliver = std::max(tx_done + std::max(link_time(0), cfg_.latency + jitter), last_deliver_);
  if (outages_.first_overlap(now, deliver)) {
    ++dropped_outage_;
    return {deliver, true, drop_reason::outage};
  }
  if (lose) {
    ++dropped_loss_;
    return {deliver, true, drop_reason::loss};
  }
  last_deliver_ = deliver;
  return {deliver, false, drop_reason::none};
}

}  // namespace loom::wire
