#include "libs/hpo/hpo_spec.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <set>

namespace loom::hpo {
namespace {

std::string at(const std::string& origin, const toml::node& n) {
  const int line = static_cast<int>(n.source().begin.line);
  return line > 0 ? origin + ":" + std::to_string(line) : origin;
}

error bad(const std::string& where, const std::string& key, const std::string& why) {
  return make_error(errc::invalid_argument, where + ": " + key + " " + why);
}

std::optional<double> number(const toml::node& n) {
  if (auto d = n.value_exact<double>()) return *d;
  if (auto i = n.value_exact<std::int64_t>()) return static_cast<double>(*i);
  return std::nullopt;
}

// One parameter: {log_uniform = [lo, hi]} | {uniform = [lo, hi]} | {int = [lo, hi]} | {choice = [...]}.
result<parameter> read_parameter(const std::string& key, const toml::table& t, const std::string& origin) {
  const std::string name = "hpo.space \"" + key + "\"";
  if (t.size() != 1)
    return bad(at(origin, t), name, "must have exactly one of log_uniform, uniform, int, choice");
  const auto first = t.cbegin();
  const std::string kind(first->first.str());
  const toml::node& node = first->second;
  parameter p;
  p.key = key;
  if (kind == "log_uniform") p.dist = distribution::log_uniform;
  else if (kind == "uniform") p.dist = distribution::uniform;
  else if (kind == "int") p.dist = distribution::int_range;
  else if (kind == "choice") p.dist = distribution::choice;
  else
    return bad(at(origin, node), name, "has unknown distribution \"" + kind +
                                           "\" (known: log_uniform, uniform, int, choice)");
  const toml::array* a = node.as_array();
  if (!a) return bad(at(origin, node), name, kind + " must be an array");
  std::vector<double> v;
  for (const toml::node& e : *a) {
    auto x = number(e);
    if (!x) return bad(at(origin, e), name, kind + " values must be numbers");
    v.push_back(*x);
  }
  if (p.dist == distribution::choice) {
    p.values = std::move(v);
  } else {
    if (v.size() != 2) return bad(at(origin, node), name, kind + " must be [lo, hi]");
    p.lo = v[0];
    p.hi = v[1];
  }
  return p;
}

// Walks [hpo.space]: a quoted "optim.lr" key, or a dotted optim.lr (nested tables).
status read_space(const toml::table& t, const std::string& prefix, const std::string& origin,
                  std::vector<parameter>& out, std::vector<std::string>& where) {
  static const std::set<std::string, std::less<>> kinds{"log_uniform", "uniform", "int", "choice"};
  for (auto&& [k, node] : t) {
    const std::string key = prefix + std::string(k.str());
    const toml::table* sub = node.as_table();
    if (!sub) return bad(at(origin, node), "hpo.space \"" + key + "\"", "must be a table such as {log_uniform = [1e-4, 1e-2]}");
    const bool leaf = !sub->empty() && kinds.count(std::string(sub->begin()->first.str()));
    if (!leaf && !sub->empty() && sub->begin()->second.is_table()) {
      if (auto st = read_space(*sub, key + ".", origin, out, where); !st) return st;
      continue;
    }
    auto p = read_parameter(key, *sub, origin);
    if (!p) return p.err();
    out.push_back(std::move(*p));
    where.push_back(at(origin, node));
  }
  return ok_status();
}

}  // namespace

const std::vector<std::string_view>& hpo_keys() {
  static const std::vector<std::string_view> k{"method",    "trials", "seed",  "grid_points", "min_steps",
                                               "max_steps", "eta",    "space", "validation"};
  return k;
}

result<std::vector<trial_config>> hpo_spec::trial_configs() const {
  if (method == "grid") return space.grid(grid_points);
  return space.sample(trials, seed);
}

result<hpo_spec> parse_hpo(std::string_view text, const std::string& origin) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& e) {
    return make_error(errc::invalid_argument,
                      origin + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  const toml::table* h = root["hpo"].as_table();
  if (!h) return make_error(errc::invalid_argument, origin + ": no [hpo] table (an hpo job needs [hpo] and [hpo.space])");
  hpo_spec s;
  std::optional<error> first;
  auto integer = [&](const char* key, auto& out, std::int64_t lo, std::int64_t hi) {
    const toml::node* n = h->get(key);
    if (!n || first) return;
    auto v = n->value_exact<std::int64_t>();
    if (!v || *v < lo || *v > hi)
      first = bad(at(origin, *n), std::string("hpo.") + key,
                  "must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    else
      out = static_cast<std::remove_reference_t<decltype(out)>>(*v);
  };
  const auto& known = hpo_keys();
  for (auto&& [k, n] : *h)
    if (std::find(known.begin(), known.end(), k.str()) == known.end())
      return bad(at(origin, n), "hpo." + std::string(k.str()),
                 "is not a known key (known: method, trials, seed, grid_points, min_steps, max_steps, eta, validation, space)");
  if (const toml::node* m = h->get("method")) {
    auto v = m->value_exact<std::string>();
    if (!v || (*v != "random" && *v != "grid")) return bad(at(origin, *m), "hpo.method", "must be \"random\" or \"grid\"");
    s.method = *v;
  }
  if (const toml::node* v = h->get("validation")) {
    auto path = v->value_exact<std::string>();
    if (!path || path->empty() || path->front() != '/')
      return bad(at(origin, *v), "hpo.validation", "must be an absolute path to a held-out text file");
    s.validation = *path;
  }
  integer("trials", s.trials, 1, std::int64_t(max_trials));
  if (first && h->get("trials") && first->message.find("hpo.trials") != std::string::npos)
    first->message += " (each trial is checked at submit and keeps a directory until it is pruned; "
                      "more than " + std::to_string(max_trials) + " is a typo, not a search)";
  integer("seed", s.seed, 0, INT64_MAX);
  integer("grid_points", s.grid_points, 2, 100);
  integer("min_steps", s.asha.min_steps, 1, 1 << 30);
  integer("max_steps", s.asha.max_steps, 0, 1 << 30);
  integer("eta", s.asha.eta, 2, 100);
  if (first) return *first;
  if (s.method == "grid")
    for (const char* k : {"trials", "seed"})
      if (const toml::node* n = h->get(k))
        return bad(at(origin, *n), std::string("hpo.") + k, "is for method = \"random\" (a grid's trials are its points)");
  if (!h->get("min_steps")) return make_error(errc::invalid_argument, origin + ": hpo.min_steps is required (ASHA's first rung)");
  if (s.asha.max_steps != 0 && s.asha.max_steps < s.asha.min_steps)
    return bad(at(origin, *h->get("max_steps")), "hpo.max_steps", "must be at least hpo.min_steps");

  const toml::table* sp = (*h)["space"].as_table();
  if (!sp || sp->empty())
    return make_error(errc::invalid_argument, origin + ": [hpo.space] is missing or empty (e.g. \"optim.lr\" = {log_uniform = [1e-4, 1e-2]})");
  std::vector<parameter> params;
  std::vector<std::string> where;
  if (auto st = read_space(*sp, "", origin, params, where); !st) return st.err();
  auto space = search_space::make(params);
  if (!space) {  // name the line of the key the message is about
    for (std::size_t i = 0; i < params.size(); ++i)
      if (space.err().message.find("\"" + params[i].key + "\"") != std::string::npos)
        return make_error(errc::invalid_argument, where[i] + ": " + space.err().message);
    return make_error(errc::invalid_argument, origin + ": " + space.err().message);
  }
  s.space = std::move(*space);
  return s;
}

}  // namespace loom::hpo
