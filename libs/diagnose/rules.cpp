#include "libs/diagnose/rule_set.hpp"

#include <algorithm>

namespace loom::diagnose {

const std::vector<rule>& rules() {
  static const std::vector<rule> all = [] {
    auto t = training_rules(), p = platform_rules();
    t.insert(t.end(), p.begin(), p.end());
    return t;
  }();
  return all;
}

std::vector<finding> diagnose(const evidence& e) {
  std::vector<finding> out;
  for (const auto& r : rules()) {
    auto f = r.match(e);
    if (!f) continue;
    f->rule = r.id;
    f->title = r.title;
    out.push_back(std::move(*f));
  }
  std::stable_sort(out.begin(), out.end(), [](const finding& a, const finding& b) { return a.confidence > b.confidence; });
  return out;
}

}  // namespace loom::diagnose
