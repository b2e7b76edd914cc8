#include "services/scheduler/jobs/job_template.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace loom::scheduler {
namespace {

const std::set<std::string, std::less<>> run_sections = {"model",      "data",    "train",   "optim",
                                                         "checkpoint", "anomaly", "parallel"};

const std::map<std::string, std::string, std::less<>> shortcuts = {
    {"dataset", "data.dataset"}, {"text", "data.text"},   {"sft", "data.sft"},       {"shards", "data.shards"},
    {"steps", "train.steps"},    {"lr", "optim.lr"},       {"seed", "train.seed"},    {"batch", "train.batch"},
    {"seq_len", "train.seq_len"}, {"threads", "train.threads"}, {"trainers", "parallel.trainers"}};

// The most trainers one stage may span (a sanity bound: a typo of 1000 is refused).
constexpr std::int64_t max_group = 64;

// [parallel] of one resolved stage: trainers = N (a gang), or min_trainers /
// max_trainers (elastic). Each trainer takes whole micro-batches of a step, so
// the group can be no larger than train.grad_accum.
result<std::pair<std::uint32_t, std::uint32_t>> group_range(const toml::table& cfg, const std::string& where) {
  auto number = [&](std::string_view key, std::int64_t fallback) -> result<std::int64_t> {
    const toml::node* n = cfg["parallel"][key].node();
    if (!n) return fallback;
    auto v = n->value_exact<std::int64_t>();
    if (!v || *v < 1 || *v > max_group)
      return make_error(errc::invalid_argument, where + ": parallel." + std::string(key) + " must be an integer in [1, " +
                                                    std::to_string(max_group) + "]");
    return *v;
  };
  if (const toml::node* p = cfg["parallel"].node(); p && !p->is_table())
    return make_error(errc::invalid_argument, where + ": [parallel] must be a table");
  if (const toml::table* p = cfg["parallel"].as_table())
    for (auto&& [k, v] : *p)
      if (k.str() != "trainers" && k.str() != "min_trainers" && k.str() != "max_trainers" && k.str() != "timeout_s")
        return make_error(errc::invalid_argument, where + ": parallel." + std::string(k.str()) +
                                                      " is not a known key (trainers, min_trainers, max_trainers, timeout_s)");
  auto n = number("trainers", 0);
  if (!n) return n.err();
  auto lo = number("min_trainers", *n ? *n : 1);
  if (!lo) return lo.err();
  auto hi = number("max_trainers", *n ? *n : *lo);
  if (!hi) return hi.err();
  if (*lo > *hi)
    return make_error(errc::invalid_argument, where + ": parallel.min_trainers " + std::to_string(*lo) +
                                                  " exceeds parallel.max_trainers " + std::to_string(*hi));
  const std::int64_t accum = cfg["train"]["grad_accum"].value_or<std::int64_t>(1);
  if (*hi > accum)
    return make_error(errc::invalid_argument,
                      where + ": " + std::to_string(*hi) + " trainers but train.grad_accum is " + std::to_string(accum) +
                          ": each trainer takes whole micro-batches of a step, so set train.grad_accum to at least " +
                          std::to_string(*hi) + " (the step's tokens are then batch x seq_len x grad_accum, whatever "
                                                "the group's size)");
  return std::pair<std::uint32_t, std::uint32_t>{static_cast<std::uint32_t>(*lo), static_cast<std::uint32_t>(*hi)};
}

error bad(std::string_view tmpl, const std::string& why) {
  return make_error(errc::invalid_argument, "template " + std::string(tmpl) + ": " + why);
}

// A TOML value from override text; a bare word is a string.
std::unique_ptr<toml::node> parse_value(const std::string& text) {
  try {
    const std::string doc = "v = " + text;
    toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
    if (toml::node* v = t.get("v")) {
      if (auto* s = v->as_string()) return std::make_unique<toml::value<std::string>>(s->get());
      if (auto* i = v->as_integer()) return std::make_unique<toml::value<std::int64_t>>(i->get());
      if (auto* f = v->as_floating_point()) return std::make_unique<toml::value<double>>(f->get());
      if (auto* b = v->as_boolean()) return std::make_unique<toml::value<bool>>(b->get());
    }
  } catch (const toml::parse_error&) {
  }
  return std::make_unique<toml::value<std::string>>(text);
}

status set_dotted(toml::table& cfg, const std::string& dotted, const toml::node& value, std::string_view tmpl,
                  const std::string& what) {
  auto dot = dotted.find('.');
  if (dot == std::string::npos) return bad(tmpl, what + ": expected section.key");
  const std::string sec = dotted.substr(0, dot), key = dotted.substr(dot + 1);
  if (!run_sections.count(sec) || key.empty() || key.find('.') != std::string::npos)
    return bad(tmpl, what + ": " + dotted + " is not section.key of a run config section");
  if (!cfg.contains(sec)) cfg.insert(sec, toml::table{});
  toml::table* t = cfg[sec].as_table();
  if (!t) return bad(tmpl, what + ": " + sec + " is not a table");
  value.visit([&](auto&& v) { t->insert_or_assign(key, v); });
  return ok_status();
}

}  // namespace

int priority_of(std::string_view cls) {
  if (cls == "low") return 0;
  if (cls == "normal") return 1;
  if (cls == "high") return 2;
  return -1;
}

result<job_plan> resolve_template(std::string_view tmpl, std::string_view text,
                                  const std::vector<std::string>& overrides) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(tmpl));
  } catch (const toml::parse_error& e) {
    return bad(tmpl, "line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
  job_plan plan;
  plan.name = std::string(tmpl);
  plan.priority_class = "normal";
  std::vector<std::string> stage_names = {"pretrain"};
  toml::table base;
  const toml::table* stage_tables = nullptr;
  for (auto&& [k, v] : root) {
    const std::string key(k.str());
    if (key == "job") {
      const toml::table* j = v.as_table();
      if (!j) return bad(tmpl, "[job] must be a table");
      for (auto&& [jk, jv] : *j) {
        const std::string name(jk.str());
        if (name == "name") {
          if (!jv.is_string()) return bad(tmpl, "job.name must be a string");
          plan.name = *jv.value<std::string>();
        } else if (name == "priority") {
          if (!jv.is_string() || priority_of(*jv.value<std::string>()) < 0)
            return bad(tmpl, "job.priority must be \"low\", \"normal\" or \"high\"");
          plan.priority_class = *jv.value<std::string>();
        } else if (name == "stages") {
          const toml::array* a = jv.as_array();
          if (!a || a->empty()) return bad(tmpl, "job.stages must be a non-empty array of names");
          stage_names.clear();
          for (auto&& s : *a) {
            if (!s.is_string()) return bad(tmpl, "job.stages must hold strings");
            std::string n = *s.value<std::string>();
            if (n.empty() || n.find_first_of(". /") != std::string::npos)
              return bad(tmpl, "stage name \"" + n + "\" must be non-empty without '.', ' ' or '/'");
            for (const auto& seen : stage_names)
              if (seen == n) return bad(tmpl, "stage \"" + n + "\" listed twice");
            stage_names.push_back(n);
          }
        } else {
          return bad(tmpl, "job." + name + " is not a known key (name, priority, stages)");
        }
      }
    } else if (key == "stage") {
      stage_tables = v.as_table();
      if (!stage_tables) return bad(tmpl, "[stage] must hold one table per stage");
    } else if (run_sections.count(key)) {
      if (!v.is_table()) return bad(tmpl, "[" + key + "] must be a table");
      base.insert(key, *v.as_table());
    } else {
      return bad(tmpl,
                 "[" + key + "] is not a section (job, stage, model, data, train, optim, checkpoint, anomaly, parallel)");
    }
  }
  if (stage_tables)
    for (auto&& [k, v] : *stage_tables) {
      const std::string name(k.str());
      if (std::find(stage_names.begin(), stage_names.end(), name) == stage_names.end())
        return bad(tmpl, "[stage." + name + "] names no stage in job.stages");
      if (!v.is_table()) return bad(tmpl, "[stage." + name + "] must be a table of \"section.key\" = value");
    }

  // Overrides, sorted into every-stage and per-stage.
  std::vector<std::pair<std::string, std::string>> every;                       // dotted, value
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> own;  // stage -> (dotted, value)
  for (const std::string& kv : overrides) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return bad(tmpl, "--set " + kv + ": expected key=value");
    std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    if (auto it = shortcuts.find(key); it != shortcuts.end()) {
      every.emplace_back(it->second, value);
      continue;
    }
    auto dot = key.find('.');
    if (dot == std::string::npos)
      return bad(tmpl, "--set " + kv + ": unknown key (shortcuts: dataset text sft shards steps lr seed batch "
                       "seq_len threads trainers; else section.key or stage.section.key)");
    const std::string first = key.substr(0, dot);
    if (std::find(stage_names.begin(), stage_names.end(), first) != stage_names.end()) {
      std::string rest = key.substr(dot + 1);
      if (auto it = shortcuts.find(rest); it != shortcuts.end()) rest = it->second;
      own[first].emplace_back(rest, value);
    } else {
      every.emplace_back(key, value);
    }
  }

  for (const std::string& name : stage_names) {
    toml::table cfg = base;
    if (stage_tables)
      if (const toml::table* st = (*stage_tables)[name].as_table())
        for (auto&& [k, v] : *st)
          if (auto s = set_dotted(cfg, std::string(k.str()), v, tmpl, "[stage." + name + "]"); !s) return s.err();
    for (const auto& [dotted, value] : every)
      if (auto s = set_dotted(cfg, dotted, *parse_value(value), tmpl, "--set " + dotted); !s) return s.err();
    for (const auto& [dotted, value] : own[name])
      if (auto s = set_dotted(cfg, dotted, *parse_value(value), tmpl, "--set " + name + "." + dotted); !s)
        return s.err();
    stage_plan sp;
    sp.name = name;
    if (const toml::table* tr = cfg["train"].as_table())
      if (auto steps = (*tr)["steps"].value<std::int64_t>()) sp.total_steps = static_cast<std::uint64_t>(*steps);
    auto range = group_range(cfg, "template " + std::string(tmpl) + ", stage " + name);
    if (!range) return range.err();
    sp.min_trainers = range->first;
    sp.max_trainers = range->second;
    std::ostringstream os;
    os << toml::toml_formatter(cfg);
    sp.config_toml = os.str() + "\n";
    plan.stages.push_back(std::move(sp));
  }
  return plan;
}

result<std::pair<std::uint32_t, std::uint32_t>> trainers_of(std::string_view config_toml) {
  toml::table cfg;
  try {
    cfg = toml::parse(config_toml, std::string_view("stage config"));
  } catch (const toml::parse_error& e) {
    return make_error(errc::corruption, "stage config: " + std::string(e.description()));
  }
  return group_range(cfg, "stage config");
}

}  // namespace loom::scheduler
