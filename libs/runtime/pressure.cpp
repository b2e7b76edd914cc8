#include "libs/runtime/pressure.hpp"

#include "libs/runtime/cgroup_files.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string_view>

namespace loom::runtime {
namespace {

std::string trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r')) s.remove_suffix(1);
  return std::string(s);
}

std::optional<double> number(std::string_view s) {
  const std::string t = trim(s);
  double v = 0;
  auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || p != t.data() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

// "MemTotal:  24576000 kB" -> bytes.
std::optional<std::uint64_t> meminfo_field(const std::string& text, std::string_view key) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    unsigned long long kb = 0;
    if (std::sscanf(line.c_str() + key.size() + 1, "%llu", &kb) != 1) return std::nullopt;
    return std::uint64_t(kb) * 1024;
  }
  return std::nullopt;
}

struct cgroup_limit {
  std::uint64_t used = 0, limit = 0;
  std::string source;
};

// The nearest ancestor (this process's own group first) of the cgroup
// `path` under `root` whose limit file holds a number below `unlimited`:
// (working set, limit). The working set is the usage less the inactive page
// cache (memory.stat), which the kernel reclaims first: not pressure (the
// kubelet's measure too).
std::optional<cgroup_limit> nearest_limit(const std::string& root, std::string path, const char* limit_file,
                                          const char* usage_file, const char* inactive_key, double unlimited,
                                          const char* source) {
  while (true) {
    const std::string dir = root + (path == "/" ? "" : path);
    auto max = cgroup::read(dir + "/" + limit_file);
    auto cur = cgroup::read(dir + "/" + usage_file);
    if (max && cur && trim(*max) != "max") {
      auto m = number(*max), c = number(*cur);
      if (m && c && *m > 0 && *m < unlimited) {
        const double inactive = double(cgroup::field(cgroup::read(dir + "/memory.stat").value_or(""), inactive_key));
        return cgroup_limit{std::uint64_t(*c > inactive ? *c - inactive : 0), std::uint64_t(*m), source};
      }
    }
    if (path == "/" || path.empty()) return std::nullopt;
    const auto slash = path.find_last_of('/');
    path = slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
  }
}

// This process's memory limit: cgroup v2 (the "0::" line, memory.max), else
// cgroup v1 (the "memory" controller's line, memory.limit_in_bytes, where
// "no limit" is a number near 2^63).
std::optional<cgroup_limit> cgroup_memory(const pressure_paths& p) {
  auto self = cgroup::read(p.proc + "/self/cgroup");
  if (!self) return std::nullopt;
  const std::string v2 = cgroup::own(*self, ""), v1 = cgroup::own(*self, "memory");
  if (!v2.empty())
    if (auto l = nearest_limit(p.cgroup, v2, "memory.max", "memory.current", "inactive_file", 1e30, "cgroup v2 memory.max"))
      return l;
  if (!v1.empty())
    return nearest_limit(p.cgroup + "/memory", v1, "memory.limit_in_bytes", "memory.usage_in_bytes",
                         "total_inactive_file", 4e18, "cgroup v1 memory.limit_in_bytes");
  return std::nullopt;
}

std::string pct(double fraction) {
  char b[16];
  std::snprintf(b, sizeof b, "%.0f%%", fraction * 100);
  return b;
}

}  // namespace

result<pressure_reading> read_pressure(const pressure_paths& p) {
  pressure_reading r;
  if (auto cg = cgroup_memory(p)) {
    r.used_bytes = cg->used;
    r.limit_bytes = cg->limit;
    r.memory_source = cg->source;
  } else {
    const std::string file = p.proc + "/meminfo";
    auto text = cgroup::read(file);
    if (!text) return make_error(errc::unavailable, file + ": cannot be read");
    auto total = meminfo_field(*text, "MemTotal"), avail = meminfo_field(*text, "MemAvailable");
    if (!total || !avail || *total == 0)
      return make_error(errc::corruption, file + ": no MemTotal or MemAvailable line");
    r.limit_bytes = *total;
    r.used_bytes = *total > *avail ? *total - *avail : 0;
    r.memory_source = p.proc + "/meminfo";
  }
  r.memory = double(r.used_bytes) / double(r.limit_bytes);
  if (auto psi = cgroup::read(p.proc + "/pressure/cpu")) {
    // "some avg10=1.23 avg60=... avg300=... total=..."
    if (auto at = psi->find("some avg10="); at != std::string::npos) {
      const std::string_view rest = std::string_view(*psi).substr(at + 11);
      if (auto v = number(rest.substr(0, rest.find(' ')))) {
        r.cpu = *v;
        r.cpu_source = p.proc + "/pressure/cpu";
      }
    }
  }
  if (p.inject.empty()) return r;
  auto text = cgroup::read(p.inject);
  if (!text) return r;  // nothing injected (yet)
  std::istringstream in(*text);
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    const std::string t = trim(line);
    if (t.empty() || t.front() == '#') continue;
    const auto eq = t.find('=');
    const std::string key = eq == std::string::npos ? t : trim(std::string_view(t).substr(0, eq));
    std::optional<double> v;
    if (eq != std::string::npos) v = number(std::string_view(t).substr(eq + 1));
    const std::string where = p.inject + ":" + std::to_string(n);
    if (key == "memory") {
      if (!v || *v < 0 || *v > 1)
        return make_error(errc::invalid_argument, where + ": memory must be a used fraction 0..1, not \"" + t + "\"");
      r.memory = *v;
      r.memory_source = "injected (" + p.inject + ")";
    } else if (key == "cpu") {
      if (!v || *v < 0 || *v > 100)
        return make_error(errc::invalid_argument, where + ": cpu must be a PSI percent 0..100, not \"" + t + "\"");
      r.cpu = *v;
      r.cpu_source = "injected (" + p.inject + ")";
    } else {
      return make_error(errc::invalid_argument, where + ": unknown key \"" + key + "\" (memory=, cpu=)");
    }
  }
  return r;
}

result<shed_settings> shed_settings_from_env(const std::function<const char*(const char*)>& getenv) {
  shed_settings s;
  auto get = [&](const char* name, double lo, double hi, const char* range, double& into) -> status {
    const char* v = getenv(name);
    if (!v || !*v) return ok_status();
    auto x = number(v);
    if (!x || *x < lo || *x > hi)
      return make_error(errc::invalid_argument, std::string(name) + "=" + v + ": " + range + " is expected");
    into = *x;
    return ok_status();
  };
  double pause_s = double(s.pause_after.count()) / 1000.0;
  if (auto st = get("LOOM_SHED_MEMORY", 0, 1, "a used fraction 0..1 (0: never)", s.memory); !st) return st.err();
  if (auto st = get("LOOM_SHED_CPU", 0, 100, "a PSI percent 0..100 (0: never)", s.cpu); !st) return st.err();
  if (auto st = get("LOOM_SHED_PAUSE_AFTER_S", 0.1, 86400, "seconds 0.1..86400", pause_s); !st) return st.err();
  s.pause_after = std::chrono::milliseconds(static_cast<long long>(std::llround(pause_s * 1000)));
  if (const char* f = getenv("LOOM_PRESSURE_FILE"); f && *f) s.inject = f;
  return s;
}

const char* to_string(pressure_level l) {
  switch (l) {
    case pressure_level::ok: return "ok";
    case pressure_level::high: return "high";
    case pressure_level::sustained: return "sustained";
  }
  return "?";
}

pressure_level pressure_gauge::update(const pressure_reading& r, clock::time_point now, bool running) {
  last_ = r;
  std::string why;
  auto add = [&](const std::string& part) { why += (why.empty() ? "" : "; ") + part; };
  if (s_.memory > 0 && r.memory >= 0 && r.memory >= s_.memory)
    add("memory " + pct(r.memory) + (r.limit_bytes ? " of " + cgroup::bytes_text(r.limit_bytes) : std::string()) + " (" +
        r.memory_source + ") >= " + pct(s_.memory));
  if (s_.cpu > 0 && r.cpu >= 0 && r.cpu >= s_.cpu) {
    char b[96];
    std::snprintf(b, sizeof b, "cpu pressure %.0f%% >= %.0f%%", r.cpu, s_.cpu);
    add(b + std::string(" (") + r.cpu_source + ")");
  }
  if (why.empty()) {
    high_since_.reset();
    level_ = pressure_level::ok;
    why_.clear();
    return level_;
  }
  if (!running) high_since_.reset();
  else if (!high_since_) high_since_ = now;
  const auto held = high_since_ ? now - *high_since_ : clock::duration::zero();
  level_ = high_since_ && held >= s_.pause_after ? pressure_level::sustained : pressure_level::high;
  if (level_ == pressure_level::sustained)
    why += " for " + std::to_string(std::chrono::duration_cast<std::chrono::seconds>(held).count()) + " s";
  why_ = std::move(why);
  return level_;
}

}  // namespace loom::runtime
