#include "libs/wire/link_shaper.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace loom;
using namespace loom::wire;
using namespace std::chrono_literals;

namespace {
link_time at_ms(double ms) { return std::chrono::duration_cast<link_time>(std::chrono::duration<double, std::milli>(ms)); }
double ms_of(link_time t) { return std::chrono::duration<double, std::milli>(t).count(); }

std::vector<bool> drop_pattern(const link_config& c, std::uint64_t stream, int n) {
  link_shaper s(c, stream);
  std::vector<bool> out;
  for (int i = 0; i < n; ++i) out.push_back(s.admit(at_ms(i), 100).dropped);
  return out;
}

link_config lossy(double rate, double burst, std::uint64_t seed) {
  link_config c;
  c.loss = gilbert_elliott::from_rate(rate, burst).value();
  c.seed = seed;
  return c;
}
}  // namespace

TEST_CASE("a perfect link delivers every message the moment it is admitted") {
  link_shaper s(link_config{});
  CHECK_FALSE(link_config{}.shapes());
  for (int i = 0; i < 5; ++i) {
    auto a = s.admit(at_ms(10 * i), 1 << 20);
    CHECK_FALSE(a.dropped);
    CHECK(a.reason == drop_reason::none);
    CHECK(a.deliver_at == at_ms(10 * i));
  }
  CHECK(s.admitted() == 5);
  CHECK(s.bytes_admitted() == 5u << 20);
}

TEST_CASE("a message within the burst crosses at once and a larger one waits for its bytes at the line rate") {
  link_config c;
  c.bandwidth = 1e6;
  c.burst_bytes = 1e4;
  link_shaper s(c);
  CHECK(s.admit(0ms, 10'000).deliver_at == 0ms);                      // the whole bucket
  CHECK(ms_of(s.admit(0ms, 100'000).deliver_at) == doctest::Approx(100.0));  // 100 kB in debt at 1 MB/s
  // At 100 ms the debt is paid; 1 kB more takes 1 ms.
  CHECK(ms_of(s.admit(100ms, 1'000).deliver_at) == doctest::Approx(101.0));
  // An idle second refills the bucket to its depth, not beyond.
  CHECK(s.admit(2000ms, 10'000).deliver_at == 2000ms);
  CHECK(ms_of(s.admit(2000ms, 1'000).deliver_at) == doctest::Approx(2001.0));
}

TEST_CASE("a queue of messages drains at exactly the configured bandwidth") {
  link_config c;
  c.bandwidth = 1.25e6;  // 10 Mbit/s
  link_shaper s(c);
  admission last;
  for (int i = 0; i < 1000; ++i) last = s.admit(0ms, 10'000);
  const double expected_s = (1000 * 10'000.0 - default_burst(c.bandwidth)) / c.bandwidth;
  CHECK(std::chrono::duration<double>(last.deliver_at).count() == doctest::Approx(expected_s).epsilon(1e-6));
  CHECK(default_burst(c.bandwidth) == 16.0 * 1024.0);  // 10 ms of 10 Mbit/s is under the 16 KiB floor
  CHECK(default_burst(1.25e8) == doctest::Approx(1.25e6));
}

TEST_CASE("uniform jitter stays within latency plus or minus jitter and never reorders messages") {
  link_config c;
  c.latency = 50ms;
  c.jitter = 10ms;
  c.seed = 3;
  link_shaper s(c);
  link_time prev{0};
  double lo = 1e9, hi = -1e9;
  for (int i = 0; i < 2000; ++i) {
    const link_time now = at_ms(i);
    auto a = s.admit(now, 100);
    REQUIRE_FALSE(a.dropped);
    CHECK(a.deliver_at >= prev);          // FIFO
    CHECK(a.deliver_at >= now + 40ms);
    CHECK(a.deliver_at <= std::max(prev, now + 60ms));
    prev = a.deliver_at;
  }
  // Far apart, no FIFO clamp: the offsets themselves spread over the range.
  link_shaper apart(c);
  for (int i = 0; i < 2000; ++i) {
    const double off = ms_of(apart.admit(at_ms(1000.0 * i), 100).deliver_at) - 1000.0 * i;
    lo = std::min(lo, off);
    hi = std::max(hi, off);
  }
  CHECK(lo >= 40.0);
  CHECK(lo < 41.0);
  CHECK(hi <= 60.0);
  CHECK(hi > 59.0);
}

TEST_CASE("normal jitter has the latency as mean and the jitter as standard deviation") {
  link_config c;
  c.latency = 50ms;
  c.jitter = 5ms;
  c.jitter_shape = jitter_dist::normal;
  c.seed = 11;
  link_shaper s(c);
  const int n = 20000;
  double sum = 0, sum2 = 0;
  for (int i = 0; i < n; ++i) {
    const double off = ms_of(s.admit(at_ms(1000.0 * i), 100).deliver_at) - 1000.0 * i;
    sum += off;
    sum2 += off * off;
  }
  const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
  CHECK(mean == doctest::Approx(50.0).epsilon(0.005));
  CHECK(sd == doctest::Approx(5.0).epsilon(0.05));
}

TEST_CASE("independent loss drops the configured fraction of messages") {
  const auto p = drop_pattern(lossy(0.1, 1.0 / 0.9, 5), 0, 20000);
  const double lost = static_cast<double>(std::count(p.begin(), p.end(), true)) / static_cast<double>(p.size());
  CHECK(lost == doctest::Approx(0.1).epsilon(0.1));
}

TEST_CASE("Gilbert-Elliott loss comes in runs of the configured mean length at the configured rate") {
  const auto p = drop_pattern(lossy(0.1, 5.0, 9), 0, 50000);
  int lost = 0, runs = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    lost += p[i];
    runs += p[i] && (i == 0 || !p[i - 1]);
  }
  CHECK(lost / 50000.0 == doctest::Approx(0.1).epsilon(0.15));
  CHECK(static_cast<double>(lost) / runs == doctest::Approx(5.0).epsilon(0.15));
  link_shaper s(lossy(0.1, 5.0, 9));
  for (int i = 0; i < 100; ++i) s.admit(at_ms(i), 1);
  CHECK(s.dropped_loss() == static_cast<std::uint64_t>(std::count(p.begin(), p.begin() + 100, true)));
}

TEST_CASE("the same seed gives the same drop pattern, and another seed or direction gives another") {
  const auto a = drop_pattern(lossy(0.3, 2.0, 7), 0, 500);
  CHECK(a == drop_pattern(lossy(0.3, 2.0, 7), 0, 500));
  CHECK(a != drop_pattern(lossy(0.3, 2.0, 8), 0, 500));
  CHECK(a != drop_pattern(lossy(0.3, 2.0, 7), 1, 500));
}

TEST_CASE("loss rates out of range are refused with the reason") {
  CHECK(gilbert_elliott::from_rate(1.0, 2.0).code() == errc::invalid_argument);
  CHECK(gilbert_elliott::from_rate(-0.1, 2.0).code() == errc::invalid_argument);
  CHECK(gilbert_elliott::from_rate(0.1, 0.5).err().message.find("at least 1 message") != std::string::npos);
  CHECK(gilbert_elliott::from_rate(0.8, 1.0).err().message.find("too short") != std::string::npos);
  CHECK(gilbert_elliott::from_rate(0.25, 4.0)->stationary_loss() == doctest::Approx(0.25));
}

TEST_CASE("a message admitted during an outage, or on the wire when one starts, is dropped") {
  link_config c;
  c.latency = 100ms;
  c.outages = {{1000ms, 2000ms}};
  link_shaper s(c);
  CHECK_FALSE(s.admit(500ms, 10).dropped);  // arrives at 600 ms
  auto in_flight = s.admit(950ms, 10);      // would arrive at 1050 ms
  CHECK(in_flight.dropped);
  CHECK(in_flight.reason == drop_reason::outage);
  CHECK(s.admit(1500ms, 10).reason == drop_reason::outage);
  CHECK(s.admit(1999ms, 10).dropped);
  auto after = s.admit(2000ms, 10);
  CHECK_FALSE(after.dropped);
  CHECK(after.deliver_at == 2100ms);
  CHECK(s.dropped_outage() == 3);
  CHECK(to_string(drop_reason::outage) == "outage");
}

TEST_CASE("an outage cuts the queued backlog, so the first message after it does not wait for it") {
  link_config c;
  c.bandwidth = 1e6;
  c.burst_bytes = 1e4;
  c.outages = {{500ms, 600ms}};
  link_shaper s(c);
  CHECK(s.admit(0ms, 1'000'000).dropped);  // would finish at 990 ms: cut at 500 ms
  CHECK(s.admit(700ms, 1'000).deliver_at == 700ms);
}

TEST_CASE("generated outages take the configured share of time in bursts of the configured lengths") {
  const outage_generator g{0.2, 5s, 15s};
  REQUIRE(validate(g).ok());
  const auto w = generate_outages(g, 7, 100'000s);
  link_time down{0};
  for (std::size_t i = 0; i < w.size(); ++i) {
    CHECK(w[i].end - w[i].start >= 5s);
    CHECK(w[i].end - w[i].start <= 15s);
    if (i > 0) {
      CHECK(w[i].start > w[i - 1].end);
    }
    down += w[i].end - w[i].start;
  }
  CHECK(w.front().start > 0s);  // the link starts up
  CHECK(std::chrono::duration<double>(down).count() / 100'000.0 == doctest::Approx(0.2).epsilon(0.05));
  const auto prefix = generate_outages(g, 7, 1000s);  // same seed: the same windows, however far generated
  REQUIRE_FALSE(prefix.empty());
  CHECK(std::equal(prefix.begin(), prefix.end(), w.begin()));
  CHECK(generate_outages(g, 8, 1000s) != generate_outages(g, 7, 1000s));
}

TEST_CASE("a shaper with generated outages drops exactly the messages inside the generated windows") {
  link_config c;
  c.outage_gen = outage_generator{0.3, 1s, 3s};
  c.seed = 42;
  const auto windows = generate_outages(*c.outage_gen, c.seed, 600s);
  link_shaper up(c, 0), down(c, 1);
  int mismatches = 0, dropped = 0;
  for (int i = 0; i < 6000; ++i) {
    const link_time now = at_ms(100.0 * i);
    bool inside = false;
    for (const auto& w : windows) inside = inside || (w.start <= now && now < w.end);
    const auto a = up.admit(now, 10);
    mismatches += a.dropped != inside;
    mismatches += down.admit(now, 10).dropped != inside;  // both directions go down together
    dropped += a.dropped;
  }
  CHECK(mismatches == 0);
  CHECK(dropped > 1000);
}

TEST_CASE("out-of-range values are refused by validate and normalised by the shaper") {
  link_config c;
  c.latency = -5ms;
  c.loss.p_good_to_bad = 2.0;
  CHECK(validate(c).code() == errc::invalid_argument);
  link_shaper s(c);
  CHECK(s.config().latency == 0ms);
  CHECK(s.config().loss.p_good_to_bad == 1.0);
  link_config b;
  b.burst_bytes = 100;
  CHECK(validate(b).err().message == "burst given without a bandwidth");
  link_config o;
  o.outage_gen = outage_generator{1.5, 1s, 2s};
  CHECK(validate(o).err().message.find("fraction") != std::string::npos);
  CHECK_FALSE(link_shaper(o).admit(10s, 1).dropped);  // the bad generator is dropped
  CHECK(link_shaper(o).admit(-5s, 1).deliver_at == 0s);  // time never goes before the start
}
