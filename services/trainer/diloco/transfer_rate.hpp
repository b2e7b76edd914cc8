// transfer_rate: a site's measured uplink bandwidth to the aggregator
// (issue 15 item 1, `loom site list`'s bandwidth): each delta's payload bytes
// over the time from its send to its acknowledgement, smoothed by an EWMA of
// gain 1/4 (the gain of libs/wire link_monitor's bandwidth estimate). The time
// holds the RTT and the aggregator's check, so the figure is a lower bound of
// the link's rate. Pure and not thread-safe: site_sync's sync thread feeds it
// under site_sync's lock.
#pragma once

#include <cstdint>

namespace loom::trainer {

class transfer_rate {
 public:
  static constexpr double gain = 0.25;

  // One transfer of `bytes` that took `seconds`; ignored when either is not
  // positive (nothing measured). The first sample is the estimate.
  void add(std::uint64_t bytes, double seconds) {
    if (bytes == 0 || !(seconds > 0)) return;
    const double sample = double(bytes) / seconds;
    bytes_per_s_ = samples_++ == 0 ? sample : bytes_per_s_ + gain * (sample - bytes_per_s_);
  }

  double bytes_per_s() const { return bytes_per_s_; }  // 0 = never measured
  std::uint64_t samples() const { return samples_; }

 private:
  double bytes_per_s_ = 0;
  std::uint64_t samples_ = 0;
};

}  // namespace loom::trainer
