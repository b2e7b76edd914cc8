#include "libs/wire/link_monitor.hpp"

#include <algorithm>
#include <cmath>

namespace loom::wire {
namespace {

using std::chrono::duration_cast;
using std::chrono::milliseconds;

double seconds(link_time t) { return std::chrono::duration<double>(t).count(); }

std::string ms_text(link_time t) { return std::to_string(duration_cast<milliseconds>(t).count()) + " ms"; }

void add_reason(std::string& all, const std::string& r) { all += (all.empty() ? "" : "; ") + r; }

}  // namespace

std::string_view to_string(link_state s) {
  switch (s) {
    case link_state::unknown: return "unknown";
    case link_state::up: return "up";
    case link_state::degraded: return "degraded";
    case link_state::down: return "down";
  }
  return "unknown";
}

void link_estimator::add_rtt(link_time at, link_time rtt) {
  if (!e_.srtt) {
    e_.srtt = rtt;
    e_.rttvar = rtt / 2;
  } else {
    const link_time dev = *e_.srtt > rtt ? *e_.srtt - rtt : rtt - *e_.srtt;
    e_.rttvar = (*e_.rttvar * 3 + dev) / 4;
    e_.srtt = (*e_.srtt * 7 + rtt) / 8;
  }
  // Monotonic deque: rtt increases front to back, so the front is the
  // minimum of the samples still in the window.
  while (!min_window_.empty() && min_window_.back().second >= rtt) min_window_.pop_back();
  min_window_.emplace_back(at, rtt);
  while (min_window_.size() > 1 && min_window_.front().first < at - t_.min_rtt_window) min_window_.pop_front();
}

void link_estimator::observe(const link_observation& o) {
  ++e_.exchanges;
  recent_.push_back(!o.ok);
  while (static_cast<int>(recent_.size()) > std::max(1, t_.window)) recent_.pop_front();
  if (!o.ok) {
    ++e_.failures;
    ++e_.consecutive_failures;
    return;
  }
  e_.consecutive_failures = 0;
  e_.last_contact = std::max(e_.last_contact.value_or(o.replied), o.replied);
  const link_time took = o.replied - o.sent;
  if (took < link_time(0)) return;  // times from two clocks: no sample
  const std::uint64_t bytes = o.bytes_out + o.bytes_in;
  if (bytes <= t_.rtt_max_bytes) {
    add_rtt(o.replied, took);
    return;
  }
  if (bytes < t_.bandwidth_min_bytes || took <= link_time(0)) return;
  // took = rtt + bytes / bw. Take the RTT out when it is known and the
  // transfer is at least a quarter of the whole (else RTT noise dominates);
  // otherwise bytes / took is still a lower bound on the bandwidth.
  const link_time base = min_window_.empty() ? link_time(0) : min_window_.front().second;  // min RTT
  const double lower_bound = static_cast<double>(bytes) / seconds(took);
  if (took - base >= took / 4) {
    const double sample = static_cast<double>(bytes) / seconds(took - base);
    e_.bandwidth_bytes_per_s = e_.bandwidth_bytes_per_s ? 0.75 * *e_.bandwidth_bytes_per_s + 0.25 * sample : sample;
  } else if (!e_.bandwidth_bytes_per_s || *e_.bandwidth_bytes_per_s < lower_bound) {
    e_.bandwidth_bytes_per_s = lower_bound;
  }
}

link_estimate link_estimator::estimate(link_time now) const {
  link_estimate e = e_;
  if (!min_window_.empty()) {
    e.min_rtt = min_window_.back().second;  // all expired: the latest sample is the best we know
    for (const auto& [at, rtt] : min_window_)
      if (at >= now - t_.min_rtt_window) {
        e.min_rtt = rtt;
        break;
      }
  }
  const auto failed = std::count(recent_.begin(), recent_.end(), true);
  e.recent_failure_ratio = recent_.empty() ? 0.0 : static_cast<double>(failed) / static_cast<double>(recent_.size());
  const std::string in_a_row = std::to_string(e.consecutive_failures) + " exchanges unanswered in a row";
  if (e.exchanges == 0) {
    e.state = link_state::unknown;
    e.reason = "never contacted";
  } else if (e.consecutive_failures >= t_.down_failures) {
    e.state = link_state::down;
    e.reason = in_a_row;
  } else if (!e.last_contact) {
    e.state = link_state::unknown;
    e.reason = "no reply yet";
  } else if (now - *e.last_contact >= t_.down_after) {
    e.state = link_state::down;
    e.reason = "no reply for " + ms_text(now - *e.last_contact);
  } else {
    std::string why;
    if (now - *e.last_contact >= t_.degraded_after) add_reason(why, "no reply for " + ms_text(now - *e.last_contact));
    if (e.recent_failure_ratio > t_.degraded_failure_ratio)
      add_reason(why, std::to_string(failed) + " of the last " + std::to_string(recent_.size()) + " exchanges failed");
    if (e.srtt && *e.srtt > t_.degraded_rtt)
      add_reason(why, "RTT " + ms_text(*e.srtt) + " above " + ms_text(t_.degraded_rtt));
    if (e.bandwidth_bytes_per_s && *e.bandwidth_bytes_per_s < t_.degraded_bandwidth)
      add_reason(why, "bandwidth " + std::to_string(std::llround(*e.bandwidth_bytes_per_s)) + " B/s below " +
                          std::to_string(std::llround(t_.degraded_bandwidth)) + " B/s");
    e.state = why.empty() ? link_state::up : link_state::degraded;
    e.reason = why;
  }
  return e;
}

void link_monitor::observe(const std::string& peer, const link_observation& o) {
  links_.try_emplace(peer, t_).first->second.observe(o);
}

link_estimate link_monitor::estimate(const std::string& peer, link_time now) const {
  auto it = links_.find(peer);
  if (it == links_.end()) return link_estimator(t_).estimate(now);
  return it->second.estimate(now);
}

std::vector<std::string> link_monitor::peers() const {
  std::vector<std::string> out;
  for (const auto& [name, _] : links_) out.push_back(name);
  return out;
}

}  // namespace loom::wire
