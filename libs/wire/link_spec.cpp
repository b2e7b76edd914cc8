#include "libs/wire/link_spec.hpp"

#include "libs/wire/link_random.hpp"

#include <cmath>
#include <charconv>
#include <set>
#include <span>
#include <string>
#include <utility>

namespace loom::wire {
namespace {

struct unit {
  std::string_view name;
  double scale;
};

// Rates in bytes per second.
constexpr unit rate_units[] = {
    {"bit", 1.0 / 8},  {"kbit", 1e3 / 8},  {"Kbit", 1e3 / 8},  {"mbit", 1e6 / 8},  {"Mbit", 1e6 / 8},
    {"gbit", 1e9 / 8}, {"Gbit", 1e9 / 8},  {"B", 1.0},         {"kB", 1e3},        {"MB", 1e6},
    {"GB", 1e9},       {"KiB", 1024.0},    {"MiB", 1048576.0}, {"GiB", 1073741824.0}};
constexpr std::string_view rate_hint =
    "use bit, kbit, mbit, gbit (bits/s) or B, kB, MB, GB, KiB, MiB, GiB (bytes/s)";
constexpr unit size_units[] = {{"B", 1.0},        {"kB", 1e3},         {"MB", 1e6},           {"GB", 1e9},
                               {"KiB", 1024.0},   {"MiB", 1048576.0},  {"GiB", 1073741824.0}};
constexpr std::string_view size_hint = "use B, kB, MB, GB, KiB, MiB, GiB or a bare number of bytes";
// Durations in nanoseconds (so "250us" is exactly 250000 ns after rounding).
constexpr unit time_units[] = {{"ns", 1.0}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"min", 60e9}, {"h", 3600e9}};
constexpr std::string_view time_hint = "use ns, us, ms, s, min or h";

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits "12.5ms" into 12.5 and "ms". Digits with at most one '.', no sign,
// no exponent: a spec is typed by people and must mean one thing.
bool split_number(std::string_view s, double& value, std::string_view& suffix) {
  std::size_t i = 0, dots = 0, digits = 0;
  for (; i < s.size() && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.'); ++i) (s[i] == '.' ? dots : digits)++;
  if (digits == 0 || dots > 1) return false;
  // from_chars, not stod: the C++ locale must not change what "2.5" means.
  const auto r = std::from_chars(s.data(), s.data() + i, value);
  if (r.ec != std::errc() || r.ptr != s.data() + i) return false;
  suffix = s.substr(i);
  return true;
}

class parser {
 public:
  explicit parser(std::string_view spec) : spec_(spec) {}

  error fail(std::string_view key, const std::string& why) const {
    return make_error(errc::invalid_argument, "link spec \"" + std::string(spec_) + "\": " +
                                                  (key.empty() ? "" : std::string(key) + ": ") + why);
  }

  result<double> number_with(std::string_view key, std::string_view v, std::span<const unit> units,
                              std::string_view hint, bool bare_ok, std::string_view default_unit = {}) const {
    double x = 0;
    std::string_view suffix;
    if (!split_number(v, x, suffix)) return fail(key, "\"" + std::string(v) + "\" is not a number with a unit");
    if (suffix.empty() && !default_unit.empty()) suffix = default_unit;
    if (suffix.empty() && bare_ok) return x;
    if (suffix.empty()) return fail(key, "\"" + std::string(v) + "\" needs a unit (" + std::string(hint) + ")");
    for (const auto& u : units)
      if (u.name == suffix) return x * u.scale;
    return fail(key, "unknown unit \"" + std::string(suffix) + "\" (" + std::string(hint) + ")");
  }

  result<double> rate(std::string_view key, std::string_view v) const {
    return number_with(key, v, rate_units, rate_hint, false);
  }
  result<double> size(std::string_view key, std::string_view v) const {
    return number_with(key, v, size_units, size_hint, true);
  }
  result<link_time> duration(std::string_view key, std::string_view v, std::string_view default_unit = {}) const {
    auto s = number_with(key, v, time_units, time_hint, false, default_unit);
    if (!s.ok()) return s.err();
    if (*s > 1e18) return fail(key, "\"" + std::string(v) + "\" is too long (over 30 years)");
    return link_time(std::llround(*s));
  }
  // "1%" or "0.01"; the result must lie in [0, 1).
  result<double> fraction(std::string_view key, std::string_view v) const {
    double x = 0;
    std::string_view suffix;
    if (!split_number(v, x, suffix) || (suffix != "" && suffix != "%"))
      return fail(key, "\"" + std::string(v) + "\" is not a fraction (0.2) or a percentage (20%)");
    if (suffix == "%") x /= 100.0;
    if (!(x < 1.0)) return fail(key, "\"" + std::string(v) + "\" must be below 1 (100%)");
    return x;
  }
  // "5-15s", "500ms-2s" or "10s": the first unit may be left out.
  result<std::pair<link_time, link_time>> range(std::string_view key, std::string_view v) const {
    const auto dash = v.find('-');
    if (dash == std::string_view::npos) {
      auto d = duration(key, v);
      if (!d.ok()) return d.err();
      return std::pair{*d, *d};
    }
    auto hi = duration(key, v.substr(dash + 1));
    if (!hi.ok()) return hi.err();
    double ignored = 0;
    std::string_view hi_unit;
    split_number(v.substr(dash + 1), ignored, hi_unit);
    auto lo = duration(key, v.substr(0, dash), hi_unit);
    if (!lo.ok()) return lo.err();
    return std::pair{*lo, *hi};
  }

  result<link_config> run();

 private:
  status item(std::string_view key, std::string_view v, link_config& c);

  std::string_view spec_;
  std::optional<double> loss_rate_, loss_burst_;
};

status parser::item(std::string_view key, std::string_view v, link_config& c) {
  if (key == "bw") {
    auto r = rate(key, v);
    if (!r.ok()) return r.err();
    if (!(*r > 0.0)) return fail(key, "must be above 0 (leave bw out for an unlimited link)");
    c.bandwidth = *r;
  } else if (key == "burst") {
    auto r = size(key, v);
    if (!r.ok()) return r.err();
    if (!(*r >= 1.0)) return fail(key, "must be at least 1 byte");
    c.burst_bytes = *r;
  } else if (key == "lat" || key == "jitter") {
    auto d = duration(key, v);
    if (!d.ok()) return d.err();
    (key == "lat" ? c.latency : c.jitter) = *d;
  } else if (key == "jitter_dist") {
    if (v != "uniform" && v != "normal") return fail(key, "\"" + std::string(v) + "\" is not uniform or normal");
    c.jitter_shape = v == "normal" ? jitter_dist::normal : jitter_dist::uniform;
  } else if (key == "loss") {
    auto f = fraction(key, v);
    if (!f.ok()) return f.err();
    loss_rate_ = *f;
  } else if (key == "loss_burst") {
    double x = 0;
    std::string_view suffix;
    if (!split_number(v, x, suffix) || !suffix.empty() || x < 1.0)
      return fail(key, "\"" + std::string(v) + "\" is not a number of messages >= 1");
    loss_burst_ = x;
  } else if (key == "outage") {
    const auto slash = v.find('/');
    if (slash == std::string_view::npos) return fail(key, "want FRACTION/BURSTS, e.g. 20%/5-15s");
    auto f = fraction(key, v.substr(0, slash));
    if (!f.ok()) return f.err();
    auto r = range(key, v.substr(slash + 1));
    if (!r.ok()) return r.err();
    c.outage_gen = outage_generator{*f, r->first, r->second};
    if (auto st = validate(*c.outage_gen); !st.ok()) return fail(key, st.err().message);
  } else if (key == "down") {
    if (v.find('-') == std::string_view::npos) return fail(key, "want START-END, e.g. 10s-12s");
    auto r = range(key, v);
    if (!r.ok()) return r.err();
    outage_window w{r->first, r->second};
    if (auto st = validate(w); !st.ok()) return fail(key, st.err().message);
    c.outages.push_back(w);
  } else if (key == "seed") {
    std::uint64_t s = 0;
    if (v.empty() || v.size() > 20) return fail(key, "\"" + std::string(v) + "\" is not an unsigned integer");
    for (char ch : v) {
      if (ch < '0' || ch > '9') return fail(key, "\"" + std::string(v) + "\" is not an unsigned integer");
      const std::uint64_t d = static_cast<std::uint64_t>(ch - '0');
      if (s > (UINT64_MAX - d) / 10) return fail(key, "\"" + std::string(v) + "\" does not fit in 64 bits");
      s = s * 10 + d;
    }
    c.seed = s;
  } else {
    return fail("", "unknown key \"" + std::string(key) +
                        "\" (known: bw, burst, lat, jitter, jitter_dist, loss, loss_burst, outage, down, seed)");
  }
  return ok_status();
}

result<link_config> parser::run() {
  link_config c;
  const std::string_view all = trim(spec_);
  if (all.empty() || all == "none") return c;
  std::set<std::string_view> seen;
  std::string_view rest = all;
  for (;;) {
    const auto comma = rest.find(',');
    const std::string_view it = trim(rest.substr(0, comma));
    const auto eq = it.find('=');
    if (it.empty()) return fail("", "empty item (two commas in a row, or a trailing comma)");
    if (eq == std::string_view::npos) return fail("", "\"" + std::string(it) + "\" is not KEY=VALUE");
    const std::string_view key = trim(it.substr(0, eq)), value = trim(it.substr(eq + 1));
    if (value.empty()) return fail(key, "has no value");
    if (key != "down" && !seen.insert(key).second) return fail(key, "given twice");
    if (auto st = item(key, value, c); !st.ok()) return st.err();
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (c.burst_bytes > 0.0 && c.bandwidth == 0.0) return fail("burst", "given without bw");
  if (seen.count("jitter_dist") && !seen.count("jitter"))
    return fail("jitter_dist", "given without jitter");
  if (loss_burst_ && !loss_rate_) return fail("loss_burst", "given without loss");
  if (loss_rate_) {
    auto g = gilbert_elliott::from_rate(*loss_rate_, loss_burst_.value_or(1.0 / (1.0 - *loss_rate_)));
    if (!g.ok()) return fail("loss_burst", g.err().message);
    c.loss = *g;
  }
  return c;
}

}  // namespace

result<link_config> parse_link_spec(std::string_view spec) { return parser(spec).run(); }

result<std::optional<link_config>> link_config_from_env(const std::function<const char*(const char*)>& env) {
  const char* v = env ? env(link_shape_env) : nullptr;
  if (v == nullptr || trim(v).empty()) return std::optional<link_config>{};
  auto c = parse_link_spec(v);
  if (!c.ok())
    return make_error(c.code(), std::string(link_shape_env) + ": " + c.err().message);
  return std::optional<link_config>{std::move(*c)};
}

std::string link_shape_env_for(std::string_view site) {
  std::string name = std::string(link_shape_env) + "_";
  for (char ch : site) {
    const char up = (ch >= 'a' && ch <= 'z') ? static_cast<char>(ch - 'a' + 'A') : ch;
    name += ((up >= 'A' && up <= 'Z') || (up >= '0' && up <= '9')) ? up : '_';
  }
  return name;
}

result<std::optional<link_config>> link_config_for_site(const std::function<const char*(const char*)>& env,
                                                        std::string_view site) {
  const std::string own = link_shape_env_for(site);
  if (const char* v = env ? env(own.c_str()) : nullptr; v != nullptr && !trim(v).empty()) {
    auto c = parse_link_spec(v);
    if (!c.ok()) return make_error(c.code(), own + ": " + c.err().message);
    return std::optional<link_config>{std::move(*c)};
  }
  auto shared = link_config_from_env(env);
  if (!shared.ok() || !*shared) return shared;
  // FNV-1a of the name, then one splitmix64 step: independent, reproducible streams per site.
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char ch : site) h = (h ^ static_cast<unsigned char>(ch)) * 0x100000001b3ULL;
  (*shared)->seed = link_random((*shared)->seed, h).next();
  return shared;
}

status check_link_shape_env(const char* const* envp) {
  const std::string_view prefix = link_shape_env;
  for (; envp && *envp; ++envp) {
    const std::string_view item = *envp;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view name = item.substr(0, eq);
    if (name.size() == prefix.size() + 1 && name.starts_with(prefix) && name[prefix.size()] == '_')
      return make_error(errc::invalid_argument,
                        std::string(name) + " names no site: write " + std::string(prefix) +
                            "_<SITE> (the site's name in capitals, other characters as _, e.g. " +
                            link_shape_env_for("north") + ") for one site, or " + std::string(prefix) +
                            " for every site");
    if (name != prefix && !(name.size() > prefix.size() + 1 && name.starts_with(prefix) && name[prefix.size()] == '_'))
      continue;
    if (auto c = parse_link_spec(item.substr(eq + 1)); !c.ok())
      return make_error(c.code(), std::string(name) + ": " + c.err().message);
  }
  return ok_status();
}

}  // namespace loom::wire
