#include "libs/wire/link_outages.hpp"

#include <algorithm>
#include <string>

namespace loom::wire {
namespace {

// The outage stream depends on the seed only, never on the direction: both
// directions of a link built from one config go down together, as a cut cable does.
constexpr std::uint64_t outage_stream = 0x6f75746167650000ULL;  // "outage"

double seconds(link_time t) { return std::chrono::duration<double>(t).count(); }

link_time from_seconds(double s) {
  return std::chrono::duration_cast<link_time>(std::chrono::duration<double>(s));
}

// One up period then one down period after `cursor`; returns the down window.
outage_window next_window(const outage_generator& g, link_random& rng, link_time cursor) {
  const double mean_down = (seconds(g.min_burst) + seconds(g.max_burst)) / 2.0;
  const double mean_up = mean_down * (1.0 - g.fraction) / g.fraction;
  const link_time up = from_seconds(rng.uniform(0.5 * mean_up, 1.5 * mean_up));
  const link_time down = from_seconds(rng.uniform(seconds(g.min_burst), seconds(g.max_burst)));
  const link_time start = cursor + up;
  return {start, start + std::max(down, link_time(1))};
}

}  // namespace

status validate(const outage_generator& g) {
  if (!(g.fraction > 0.0 && g.fraction < 1.0))
    return make_error(errc::invalid_argument,
                      "outage fraction must be in (0, 1), got " + std::to_string(g.fraction));
  if (g.min_burst <= link_time(0))
    return make_error(errc::invalid_argument, "outage bursts must last more than 0");
  if (g.max_burst < g.min_burst)
    return make_error(errc::invalid_argument, "outage burst range is reversed (max < min)");
  return ok_status();
}

status validate(const outage_window& w) {
  if (w.start < link_time(0)) return make_error(errc::invalid_argument, "outage window starts before the link");
  if (w.end <= w.start) return make_error(errc::invalid_argument, "outage window must end after it starts");
  return ok_status();
}

std::vector<outage_window> generate_outages(const outage_generator& g, std::uint64_t seed, link_time horizon) {
  std::vector<outage_window> out;
  link_random rng(seed, outage_stream);
  for (link_time cursor{0};;) {
    const outage_window w = next_window(g, rng, cursor);
    if (w.start >= horizon) return out;
    out.push_back(w);
    cursor = w.end;
  }
}

outage_schedule::outage_schedule(std::vector<outage_window> fixed, std::optional<outage_generator> gen,
                                 std::uint64_t seed)
    : gen_(gen), rng_(seed, outage_stream) {
  for (const auto& w : fixed)
    if (w.end > w.start) fixed_.push_back(w);
  std::sort(fixed_.begin(), fixed_.end(), [](const auto& a, const auto& b) { return a.start < b.start; });
  if (gen_ && !validate(*gen_).ok()) gen_.reset();  // normalised away, as documented on link_shaper
}

void outage_schedule::generate_until(link_time t) {
  while (gen_ && generated_to_ <= t) {
    const outage_window w = next_window(*gen_, rng_, generated_to_);
    generated_.push_back(w);
    generated_to_ = w.end;
  }
}

std::optional<outage_window> outage_schedule::first_overlap(link_time from, link_time to) {
  std::optional<outage_window> best;
  for (const auto& w : fixed_) {
    if (w.start > to) break;
    if (w.end > from) {
      best = w;
      break;  // sorted by start: the first hit starts earliest
    }
  }
  generate_until(to);
  while (!generated_.empty() && generated_.front().end <= from) generated_.pop_front();
  if (!generated_.empty() && generated_.front().start <= to && (!best || generated_.front().start < best->start))
    best = generated_.front();
  return best;
}

}  // namespace loom::wire
