#include "libs/hpo/search_space.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace loom::hpo {
namespace {

error bad(const std::string& key, const std::string& why) {
  return make_error(errc::invalid_argument, "hpo.space \"" + key + "\": " + why);
}

// splitmix64: a fixed generator, so a seed means the same trials everywhere.
class splitmix {
 public:
  explicit splitmix(std::uint64_t seed) : x_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (x_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double unit() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  std::uint64_t below(std::uint64_t n) { return next() % n; }  // bias < n / 2^64: irrelevant here

 private:
  std::uint64_t x_;
};

// Reals are kept to 6 significant digits, so the --set text and the value
// a local run uses are the same number.
double six_digits(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return std::strtod(buf, nullptr);
}

assignment assign(const parameter& p, double v) {
  return {p.key, p.integer ? std::round(v) : six_digits(v), p.integer};
}

// `points` values of p for the grid.
std::vector<double> grid_values(const parameter& p, int points) {
  std::vector<double> out;
  switch (p.dist) {
    case distribution::choice:
      return p.values;
    case distribution::int_range:
      if (p.hi - p.lo + 1 <= points) {
        for (double v = p.lo; v <= p.hi; ++v) out.push_back(v);
        return out;
      }
      [[fallthrough]];
    case distribution::uniform:
      for (int i = 0; i < points; ++i) out.push_back(p.lo + (p.hi - p.lo) * i / (points - 1));
      break;
    case distribution::log_uniform:
      for (int i = 0; i < points; ++i)
        out.push_back(std::exp(std::log(p.lo) + (std::log(p.hi) - std::log(p.lo)) * i / (points - 1)));
      break;
  }
  if (p.integer) {  // evenly spaced integers, without repeats
    for (double& v : out) v = std::round(v);
    out.erase(std::unique(out.begin(), out.end()), out.end());
  }
  return out;
}

}  // namespace

const std::vector<tunable_key>& tunable_keys() {
  static const std::vector<tunable_key> k{
      {"optim.lr", false},           {"optim.min_lr", false},    {"optim.warmup_steps", true},
      {"optim.weight_decay", false}, {"optim.beta1", false},     {"optim.beta2", false},
      {"optim.eps", false},          {"optim.grad_clip", false}, {"train.batch", true},
      {"train.seq_len", true},       {"train.grad_accum", true}, {"train.seed", true},
  };
  return k;
}

std::string assignment::text() const {
  char buf[32];
  if (integer) std::snprintf(buf, sizeof buf, "%lld", static_cast<long long>(value));
  else std::snprintf(buf, sizeof buf, "%.6g", value);
  return buf;
}

std::vector<std::string> trial_config::overrides() const {
  std::vector<std::string> out;
  for (const assignment& a : values) out.push_back(a.key + "=" + a.text());
  return out;
}

std::string trial_config::text() const {
  std::string s;
  for (const std::string& o : overrides()) s += (s.empty() ? "" : " ") + o;
  return s;
}

std::optional<double> trial_config::number(const std::string& key) const {
  for (const assignment& a : values)
    if (a.key == key) return a.value;
  return std::nullopt;
}

result<search_space> search_space::make(std::vector<parameter> params) {
  if (params.empty()) return make_error(errc::invalid_argument, "hpo.space: no parameter to search");
  std::set<std::string> seen;
  for (parameter& p : params) {
    const auto& keys = tunable_keys();
    auto it = std::find_if(keys.begin(), keys.end(), [&](const tunable_key& k) { return p.key == k.key; });
    if (it == keys.end()) {
      std::string known;
      for (const auto& k : keys) known += (known.empty() ? "" : ", ") + std::string(k.key);
      return bad(p.key, p.key == "train.steps" ? "is the resource the search hands out (hpo.max_steps), not a parameter"
                                               : "is not a key a search may set (known: " + known + ")");
    }
    if (!seen.insert(p.key).second) return bad(p.key, "appears twice");
    p.integer = it->integer;
    auto whole = [](double v) { return std::isfinite(v) && v == std::round(v); };
    if (p.dist == distribution::choice) {
      if (p.values.empty()) return bad(p.key, "choice needs at least one value");
      for (double v : p.values) {
        if (!std::isfinite(v)) return bad(p.key, "choice values must be finite numbers");
        if (p.integer && !whole(v)) return bad(p.key, "takes integers: choice values must be integers");
      }
      continue;
    }
    if (!std::isfinite(p.lo) || !std::isfinite(p.hi) || !(p.lo < p.hi))
      return bad(p.key, "range [lo, hi] needs finite lo < hi");
    if (p.dist == distribution::log_uniform && p.lo <= 0) return bad(p.key, "log_uniform needs lo > 0");
    if (p.dist == distribution::int_range && !(whole(p.lo) && whole(p.hi)))
      return bad(p.key, "int range bounds must be integers");
    if (p.integer && p.dist != distribution::int_range)
      return bad(p.key, "takes integers: use {int = [lo, hi]} or {choice = [...]}");
  }
  search_space s;
  s.params_ = std::move(params);
  return s;
}

std::vector<trial_config> search_space::sample(int n, std::uint64_t seed) const {
  splitmix rng(seed);
  std::vector<trial_config> out(static_cast<std::size_t>(std::max(n, 0)));
  for (trial_config& t : out) {
    for (const parameter& p : params_) {
      double v = 0;
      switch (p.dist) {
        case distribution::log_uniform:
          v = std::exp(std::log(p.lo) + (std::log(p.hi) - std::log(p.lo)) * rng.unit());
          break;
        case distribution::uniform:
          v = p.lo + (p.hi - p.lo) * rng.unit();
          break;
        case distribution::int_range:
          v = p.lo + double(rng.below(std::uint64_t(p.hi - p.lo) + 1));
          break;
        case distribution::choice:
          v = p.values[rng.below(p.values.size())];
          break;
      }
      t.values.push_back(assign(p, v));
    }
  }
  return out;
}

result<std::vector<trial_config>> search_space::grid(int points, std::size_t limit) const {
  if (points < 2) return make_error(errc::invalid_argument, "hpo.grid_points must be at least 2");
  std::vector<std::vector<double>> axes;
  std::size_t total = 1;
  for (const parameter& p : params_) {
    axes.push_back(grid_values(p, points));
    total *= axes.back().size();
    if (total > limit)
      return make_error(errc::invalid_argument, "hpo: the grid has more than " + std::to_string(limit) +
                                                    " trials (a search's most); use fewer grid_points or values, "
                                                    "or method = \"random\"");
  }
  std::vector<trial_config> out(total);
  for (std::size_t i = 0; i < total; ++i) {
    std::size_t rest = i;  // mixed-radix digits, the last key fastest
    std::vector<std::size_t> digit(axes.size());
    for (std::size_t a = axes.size(); a-- > 0;) {
      digit[a] = rest % axes[a].size();
      rest /= axes[a].size();
    }
    for (std::size_t a = 0; a < axes.size(); ++a) out[i].values.push_back(assign(params_[a], axes[a][digit[a]]));
  }
  return out;
}

}  // namespace loom::hpo
