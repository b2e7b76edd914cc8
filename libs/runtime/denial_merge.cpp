#include "libs/runtime/denial_merge.hpp"

#include <algorithm>

namespace loom::runtime {

denial_merge::denial_merge(std::chrono::milliseconds window, std::size_t max_windows)
    : window_(window.count() > 0 ? window : std::chrono::milliseconds(1)), max_windows_(max_windows) {}

bool denial_merge::admit(const denial& d, clock::time_point now, std::uint64_t* ordinal_of_first) {
  auto it = windows_.find(key_of(d));
  if (it != windows_.end() && now - it->second.opened < window_) {
    auto& w = it->second;
    if (w.repeats++ == 0) w.first_repeat_id = d.request_id;
    w.last = d;
    if (ordinal_of_first) *ordinal_of_first = w.first_ordinal;
    return false;
  }
  // No open window (or one that ended and due() has not closed yet: its
  // summary is still owed, so it is not replaced here but recorded apart).
  if (it == windows_.end() && windows_.size() < max_windows_) {
    window w;
    w.opened = now;
    w.last = d;
    windows_.emplace(key_of(d), std::move(w));
  }
  return true;
}

void denial_merge::opened(const denial& d, std::uint64_t ordinal) {
  auto it = windows_.find(key_of(d));
  if (it != windows_.end() && it->second.repeats == 0) it->second.first_ordinal = ordinal;
}

denial_summary denial_merge::summary_of(const window& w) const {
  denial_summary s;
  s.last = w.last;
  s.repeats = w.repeats;
  s.first_request_id = w.first_repeat_id;
  s.window = window_;
  s.first_ordinal = w.first_ordinal;
  return s;
}

std::vector<denial_summary> denial_merge::due(clock::time_point now) {
  std::vector<std::pair<clock::time_point, denial_summary>> closed;
  for (auto it = windows_.begin(); it != windows_.end();) {
    if (now - it->second.opened < window_) {
      ++it;
      continue;
    }
    if (it->second.repeats > 0) closed.emplace_back(it->second.opened, summary_of(it->second));
    it = windows_.erase(it);
  }
  std::stable_sort(closed.begin(), closed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<denial_summary> out;
  out.reserve(closed.size());
  for (auto& c : closed) out.push_back(std::move(c.second));
  return out;
}

std::vector<denial_summary> denial_merge::flush() {
  std::vector<denial_summary> out;
  for (const auto& [k, w] : windows_)
    if (w.repeats > 0) out.push_back(summary_of(w));
  windows_.clear();
  return out;
}

}  // namespace loom::runtime
