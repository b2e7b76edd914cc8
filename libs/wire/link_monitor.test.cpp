#include "libs/wire/link_monitor.hpp"

#include <doctest/doctest.h>

using namespace loom::wire;
using namespace std::chrono_literals;

namespace {
// A small exchange sent at `at` that took `rtt`.
link_observation ping(link_time at, link_time rtt) { return {at, at + rtt, 200, 200, true}; }
link_observation transfer(link_time at, link_time took, std::uint64_t bytes) { return {at, at + took, bytes, 100, true}; }
link_observation missed(link_time at) { return {at, at + 2s, 200, 0, false}; }
double ms_of(link_time t) { return std::chrono::duration<double, std::milli>(t).count(); }
}  // namespace

TEST_CASE("a peer never observed is unknown, and one that never answered is unknown until it is down") {
  link_monitor m;
  auto e = m.estimate("site-a", 10s);
  CHECK(e.state == link_state::unknown);
  CHECK(e.reason == "never contacted");
  m.observe("site-a", missed(0s));
  CHECK(m.estimate("site-a", 3s).reason == "no reply yet");
  m.observe("site-a", missed(3s));
  m.observe("site-a", missed(6s));
  e = m.estimate("site-a", 9s);
  CHECK(e.state == link_state::down);
  CHECK(e.reason == "3 exchanges unanswered in a row");
  CHECK(to_string(e.state) == "down");
}

TEST_CASE("smoothed RTT and its variation follow RFC 6298") {
  link_estimator l;
  l.observe(ping(0s, 100ms));
  auto e = l.estimate(1s);
  CHECK(*e.srtt == 100ms);
  CHECK(*e.rttvar == 50ms);
  l.observe(ping(1s, 200ms));
  e = l.estimate(2s);
  CHECK(ms_of(*e.srtt) == doctest::Approx(112.5));   // 7/8 * 100 + 1/8 * 200
  CHECK(ms_of(*e.rttvar) == doctest::Approx(62.5));  // 3/4 * 50 + 1/4 * 100
  CHECK(*e.min_rtt == 100ms);
  CHECK(*e.last_contact == 1200ms);
  CHECK(e.state == link_state::up);
  CHECK(e.reason.empty());
}

TEST_CASE("the minimum RTT forgets samples older than its window") {
  link_estimator l;  // 60 s window
  auto at = [](int t) { return std::chrono::seconds(t); };
  l.observe(ping(0s, 50ms));
  for (int t = 10; t <= 30; t += 10) l.observe(ping(at(t), 100ms + std::chrono::milliseconds(t)));
  CHECK(*l.estimate(30s).min_rtt == 50ms);
  for (int t = 40; t <= 120; t += 10) l.observe(ping(at(t), 100ms + std::chrono::milliseconds(t)));
  CHECK(*l.estimate(125s).min_rtt == 170ms);  // window [65 s, 125 s]: the t = 70 s sample is the oldest left
  CHECK(*l.estimate(300s).min_rtt == 220ms);  // all expired: the latest sample
}

TEST_CASE("a bulk transfer measures bandwidth with the RTT taken out, and small messages do not move it") {
  link_estimator l;
  for (int i = 0; i < 5; ++i) l.observe(ping(std::chrono::seconds(i), 100ms));
  l.observe(transfer(10s, 1100ms, 1'000'000));  // 100 ms RTT + 1 s at 1 MB/s
  auto e = l.estimate(12s);
  REQUIRE(e.bandwidth_bytes_per_s.has_value());
  CHECK(*e.bandwidth_bytes_per_s == doctest::Approx(1.0001e6).epsilon(0.001));
  l.observe(transfer(13s, 2100ms, 1'000'000));  // now 0.5 MB/s: the EWMA moves a quarter of the way
  CHECK(*l.estimate(16s).bandwidth_bytes_per_s == doctest::Approx(0.75 * 1.0001e6 + 0.25 * 0.50005e6).epsilon(0.001));
  const double before = *l.estimate(16s).bandwidth_bytes_per_s;
  l.observe(transfer(17s, 300ms, 100'000));  // 100 kB: too small to say anything about bandwidth
  CHECK(*l.estimate(18s).bandwidth_bytes_per_s == before);
  CHECK(*l.estimate(18s).srtt == 100ms);  // nor about RTT (its transfer time is not negligible)
}

TEST_CASE("a transfer dominated by the RTT only raises the bandwidth to the lower bound it proves") {
  link_estimator l;
  l.observe(ping(0s, 100ms));
  l.observe(transfer(1s, 1100ms, 1'000'000));   // ~1 MB/s
  l.observe(transfer(3s, 101ms, 10'000'000));   // 10 MB in 101 ms: >= 99 MB/s whatever the RTT
  CHECK(*l.estimate(4s).bandwidth_bytes_per_s == doctest::Approx(10e6 / 0.101).epsilon(0.01));
  link_estimator fresh;  // no RTT known: bytes / time is a lower bound too
  fresh.observe(transfer(0s, 2s, 1'000'000));
  CHECK(*fresh.estimate(3s).bandwidth_bytes_per_s == doctest::Approx(500'050.0).epsilon(0.001));
}

TEST_CASE("a link goes degraded then down as its last reply ages, and up again on the next reply") {
  link_estimator l;
  l.observe(ping(0s, 50ms));
  CHECK(l.estimate(5s).state == link_state::up);
  auto e = l.estimate(8050ms);
  CHECK(e.state == link_state::degraded);
  CHECK(e.reason == "no reply for 8000 ms");
  e = l.estimate(15050ms);
  CHECK(e.state == link_state::down);
  CHECK(e.reason == "no reply for 15000 ms");
  l.observe(ping(20s, 50ms));
  CHECK(l.estimate(21s).state == link_state::up);
}

TEST_CASE("three unanswered exchanges in a row make a link down at once, and one answer brings it back") {
  link_estimator l;
  l.observe(ping(0s, 50ms));
  l.observe(missed(1s));
  l.observe(missed(2s));
  CHECK(l.estimate(2500ms).state == link_state::degraded);  // 2 of 3 failed
  l.observe(missed(3s));
  auto e = l.estimate(3500ms);
  CHECK(e.state == link_state::down);
  CHECK(e.consecutive_failures == 3);
  CHECK(e.failures == 3);
  CHECK(e.exchanges == 4);
  l.observe(ping(4s, 50ms));
  CHECK(l.estimate(4500ms).consecutive_failures == 0);
}

TEST_CASE("high RTT, scattered failures and low bandwidth each degrade a link, with every reason given") {
  link_estimator l;
  for (int i = 0; i < 17; ++i) l.observe(ping(std::chrono::seconds(i), 600ms));
  for (int i = 17; i < 20; ++i) {
    l.observe(missed(std::chrono::seconds(i)));
    l.observe(ping(std::chrono::seconds(i), 600ms));
  }
  l.observe(transfer(21s, 10600ms, 1'000'000));  // 1,000,100 B in 10 s after the 600 ms RTT
  auto e = l.estimate(32s);
  CHECK(e.state == link_state::degraded);
  CHECK(e.recent_failure_ratio == doctest::Approx(0.15));
  CHECK(e.reason == "3 of the last 20 exchanges failed; RTT 600 ms above 500 ms; "
                    "bandwidth 100010 B/s below 125000 B/s");
}

TEST_CASE("the monitor keeps one estimate per peer") {
  link_monitor m;
  m.observe("site-b", ping(0s, 80ms));
  m.observe("site-a", ping(0s, 20ms));
  CHECK(*m.estimate("site-a", 1s).srtt == 20ms);
  CHECK(*m.estimate("site-b", 1s).srtt == 80ms);
  CHECK((m.peers() == std::vector<std::string>{"site-a", "site-b"}));
}
