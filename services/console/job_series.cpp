#include "services/console/job_series.hpp"

#include <algorithm>

namespace loom::console {

bool job_series::add(const std::string& job, const series_point& p) {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    if (jobs_.size() >= max_jobs) {
      auto oldest = std::min_element(jobs_.begin(), jobs_.end(),
                                     [](const auto& a, const auto& b) { return a.second.touched < b.second.touched; });
      jobs_.erase(oldest);
    }
    it = jobs_.emplace(job, curve{}).first;
  }
  auto& c = it->second;
  for (auto r = c.points.rbegin(); r != c.points.rend(); ++r)
    if (r->stage == p.stage) {
      if (r->step == p.step) return false;
      break;
    }
  c.points.push_back(p);
  c.touched = ++clock_;
  if (c.points.size() > max_points) {
    // Drop the oldest quarter: the curve keeps its recent shape in full.
    const std::size_t n = max_points / 4;
    c.points.erase(c.points.begin(), c.points.begin() + static_cast<std::ptrdiff_t>(n));
    c.dropped += n;
  }
  return true;
}

std::vector<series_point> job_series::since(const std::string& job, std::size_t from, std::size_t* next) const {
  std::lock_guard lk(mu_);
  auto it = jobs_.find(job);
  if (it == jobs_.end()) {
    if (next) *next = from;
    return {};
  }
  const auto& c = it->second;
  const std::size_t start = from > c.dropped ? from - c.dropped : 0;
  std::vector<series_point> out;
  if (start < c.points.size()) out.assign(c.points.begin() + static_cast<std::ptrdiff_t>(start), c.points.end());
  if (next) *next = c.dropped + c.points.size();
  return out;
}

}  // namespace loom::console
