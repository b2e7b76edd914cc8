#include "client/options.hpp"

#include "client/input.hpp"
#include "client/output.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>
#include <utility>

namespace loom::cli {

namespace opt {

option_spec flag(std::string name, std::string help) {
  option_spec o;
  o.name = std::move(name);
  o.kind = value_kind::flag;
  o.help = std::move(help);
  return o;
}

namespace {
option_spec valued(std::string name, value_kind k, std::string metavar, std::string help) {
  option_spec o;
  o.name = std::move(name);
  o.kind = k;
  o.metavar = std::move(metavar);
  o.help = std::move(help);
  return o;
}
}  // namespace

option_spec text(std::string name, std::string metavar, std::string help) {
  return valued(std::move(name), value_kind::text, std::move(metavar), std::move(help));
}

option_spec path(std::string name, std::string metavar, std::string help) {
  return valued(std::move(name), value_kind::path, std::move(metavar), std::move(help));
}

option_spec choice(std::string name, std::vector<std::string> choices, std::string help) {
  std::string metavar;
  for (const auto& c : choices) metavar += (metavar.empty() ? "" : "|") + c;
  auto o = valued(std::move(name), value_kind::choice, std::move(metavar), std::move(help));
  o.choices = std::move(choices);
  return o;
}

option_spec count(std::string name, std::string metavar, std::uint64_t min, std::uint64_t max, std::string help) {
  auto o = valued(std::move(name), value_kind::count, std::move(metavar), std::move(help));
  o.min = min;
  o.max = max;
  return o;
}

option_spec seconds(std::string name, double max_seconds, std::string help) {
  auto o = valued(std::move(name), value_kind::seconds, "S", std::move(help));
  o.max_seconds = max_seconds;
  return o;
}

option_spec size(std::string name, std::uint64_t min, std::uint64_t max, std::string help) {
  auto o = valued(std::move(name), value_kind::size, "SIZE", std::move(help));
  o.min = min;
  o.max = max;
  return o;
}

option_spec list(std::string name, std::string metavar, std::string help) {
  return valued(std::move(name), value_kind::list, std::move(metavar), std::move(help));
}

option_spec key_values(std::string name, std::string help) {
  auto o = valued(std::move(name), value_kind::key_value, "KEY=VALUE", std::move(help));
  o.repeated = true;
  return o;
}

option_spec repeated(option_spec o) {
  o.repeated = true;
  return o;
}

option_spec required(option_spec o) {
  o.required = true;
  return o;
}

}  // namespace opt

const command_spec* find_command(std::string_view path) {
  for (const auto& c : command_table())
    if (c.path == path) return &c;
  return nullptr;
}

const option_spec* find_option(const command_spec& c, std::string_view name) {
  for (const auto* list : {&c.options, &global_options()})
    for (const auto& o : *list)
      if (o.name == name) return &o;
  return nullptr;
}

namespace {

// "512MiB", "2GiB", "64M", "1000": bytes; nullopt when malformed or past 2^64.
std::optional<std::uint64_t> parse_size(std::string_view t) {
  std::uint64_t n = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), n);
  if (r.ec != std::errc() || r.ptr == t.data()) return std::nullopt;
  const std::string_view unit(r.ptr, static_cast<std::size_t>(t.data() + t.size() - r.ptr));
  static const std::pair<std::string_view, std::uint64_t> units[] = {
      {"", 1},           {"B", 1},           {"K", 1ULL << 10},   {"KiB", 1ULL << 10}, {"KB", 1000},
      {"M", 1ULL << 20}, {"MiB", 1ULL << 20}, {"MB", 1000000},    {"G", 1ULL << 30},   {"GiB", 1ULL << 30},
      {"GB", 1000000000}, {"T", 1ULL << 40}, {"TiB", 1ULL << 40}, {"TB", 1000000000000}};
  for (const auto& [u, m] : units)
    if (unit == u) {
      if (n > UINT64_MAX / m) return std::nullopt;
      return n * m;
    }
  return std::nullopt;
}

std::string number_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.10g", v);
  return buf;
}

}  // namespace

result<typed_value> check_value(const option_spec& o, const std::string& value) {
  typed_value v;
  v.text = value;
  const std::string given = "'" + printable(value) + "'";
  auto bad = [&](const std::string& takes) {
    return make_error(errc::invalid_argument, "--" + o.name + " takes " + takes + ", not " + given);
  };
  if (value.empty() && o.kind != value_kind::flag)
    return make_error(errc::invalid_argument, "--" + o.name + " needs a non-empty value");
  switch (o.kind) {
    case value_kind::flag:
      return make_error(errc::invalid_argument, "--" + o.name + " takes no value (got " + given + ")");
    case value_kind::text:
    case value_kind::path:
      return v;
    case value_kind::choice:
      for (const auto& c : o.choices)
        if (c == value) return v;
      return bad("one of " + o.metavar);
    case value_kind::count: {
      const auto r = std::from_chars(value.data(), value.data() + value.size(), v.number);
      const std::string range = "a whole number from " + std::to_string(o.min) + " to " + std::to_string(o.max);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size() || v.number < o.min || v.number > o.max)
        return bad(range);
      return v;
    }
    case value_kind::seconds: {
      double s = 0;
      const auto r = std::from_chars(value.data(), value.data() + value.size(), s);
      if (r.ec != std::errc() || r.ptr != value.data() + value.size() || !std::isfinite(s) || s <= 0 ||
          s > o.max_seconds)
        return bad("seconds, more than 0 and at most " + number_text(o.max_seconds));
      v.duration = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(s * 1000)));
      return v;
    }
    case value_kind::size: {
      const auto n = parse_size(value);
      if (!n || *n < o.min || *n > o.max)
        return bad("a size like 512MiB or 2GiB, from " + size_text(o.min) + " to " + size_text(o.max));
      v.number = *n;
      return v;
    }
    case value_kind::list:
      if (value.find_first_not_of(',') == std::string::npos) return bad("a comma-separated list of " + o.metavar);
      return v;
    case value_kind::key_value: {
      const auto eq = value.find('=');
      if (eq == 0 || eq == std::string::npos || eq + 1 == value.size()) return bad("KEY=VALUE");
      return v;
    }
  }
  return v;
}

namespace {

std::string option_usage(const option_spec& o) {
  std::string s = "--" + o.name + (o.kind == value_kind::flag ? "" : " " + o.metavar);
  if (!o.required) s = "[" + s + "]";
  return o.repeated ? s + "..." : s;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.append(width - s.size(), ' ');
  else s += "  ";
  return s;
}

// The words, operands and required options: what the overview shows.
std::string synopsis(const command_spec& c, bool all_options) {
  std::string s = c.path;
  if (!c.operands.empty()) s += " " + c.operands;
  for (const auto& o : c.options)
    if (all_options || o.required) s += " " + option_usage(o);
  return s;
}

}  // namespace

std::string usage_line(const command_spec& c) { return "usage: loom " + synopsis(c, true); }

std::string command_help(const command_spec& c) {
  std::string out = usage_line(c) + "\n  " + c.help + "\n";
  if (!c.details.empty()) out += c.details + "\n";
  if (!c.options.empty()) out += "options:\n";
  for (const auto& o : c.options)
    out += "  " + pad(option_usage(o), 34) + o.help + (o.required ? " (required)" : "") + "\n";
  out += "global options:\n";
  for (const auto& o : global_options())
    if (o.name != "h") out += "  " + pad(option_usage(o), 34) + o.help + "\n";
  return out;
}

std::string overview(std::string_view prefix) {
  std::string out;
  for (const auto& c : command_table()) {
    const bool under = prefix.empty() || c.path == prefix ||
                       (c.path.size() > prefix.size() && c.path.starts_with(prefix) && c.path[prefix.size()] == ' ');
    if (c.hidden || !under) continue;
    out += "  " + pad(synopsis(c, false), 44) + c.help + "\n";
  }
  return out;
}

}  // namespace loom::cli
