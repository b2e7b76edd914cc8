#include "libs/runspec/job_template.hpp"
#include "libs/runspec/hpo_stage.hpp"
#include "libs/runspec/schema.hpp"
#include "libs/runspec/toml_reader.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace loom::runspec {
namespace {

const std::set<std::string, std::less<>> run_sections = {"model",    "data",     "train",  "optim", "checkpoint",
                                                         "anomaly",  "parallel", "diloco", "export", "align",
                                                         "reward",   "hpo"};

const std::map<std::string, std::string, std::less<>> shortcuts = {
    {"dataset", "data.dataset"}, {"text", "data.text"},   {"sft", "data.sft"},       {"shards", "data.shards"},
    {"steps", "train.steps"},    {"lr", "optim.lr"},       {"seed", "train.seed"},    {"batch", "train.batch"},
    {"seq_len", "train.seq_len"}, {"threads", "train.threads"}, {"trainers", "parallel.trainers"}};

error bad(std::string_view tmpl, const std::string& why) {
  return make_error(errc::invalid_argument, "template " + std::string(tmpl) + ": " + why);
}

status set_dotted(toml::table& cfg, const std::string& dotted, const toml::node& value, std::string_view tmpl,
                  const std::string& what) {
  if (dotted == "kind") {  // the stage's kind: the one key outside a section
    value.visit([&](auto&& v) { cfg.insert_or_assign("kind", v); });
    return ok_status();
  }
  auto dot = dotted.find('.');
  if (dot == std::string::npos) return bad(tmpl, what + ": expected section.key");
  const std::string sec = dotted.substr(0, dot), key = dotted.substr(dot + 1);
  if (!run_sections.count(sec) || key.empty() || key.find('.') != std::string::npos)
    return bad(tmpl, what + ": " + dotted + " is not section.key of a run config section");
  // Every key of a run config is a bare TOML word; anything else would be
  // written out as text the trainer cannot read back (found by fuzz_template).
  for (char ch : key)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
      return bad(tmpl, what + ": " + dotted + " is not section.key of a run config section (a key is letters, digits, "
                                              "'_' and '-')");
  if (!cfg.contains(sec)) cfg.insert(sec, toml::table{});
  toml::table* t = cfg[sec].as_table();
  if (!t) return bad(tmpl, what + ": " + sec + " is not a table");
  value.visit([&](auto&& v) { t->insert_or_assign(key, v); });
  return ok_status();
}

}  // namespace

std::string stage_name_problem(std::string_view name) {
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'); };
  const std::string why =
      "must be 1 to " + std::to_string(max_stage_name) +
      " letters, digits, '-' or '_', starting with a letter or digit (a stage name is a directory of the job's, the "
      "trainer's stage name and a --set prefix)";
  if (name.empty() || name.size() > max_stage_name || !alnum(name.front())) return why;
  for (char ch : name)
    if (!alnum(ch) && ch != '-' && ch != '_') return why;
  if (run_sections.count(name))
    return "is a run section's name: `--set " + std::string(name) + ".KEY=V` would mean that stage alone; rename the stage";
  return "";
}

bool override_names_path(std::string_view key) {
  auto is_path = [](std::string_view dotted) {
    const key_spec* k = find_key(dotted);
    return k && k->kind == value_kind::path;
  };
  const auto last_dot = key.rfind('.');
  const std::string_view last = last_dot == std::string_view::npos ? key : key.substr(last_dot + 1);
  if (auto it = shortcuts.find(last); it != shortcuts.end()) return is_path(it->second);  // "text", "sft.text"
  if (last_dot == std::string_view::npos) return false;
  const auto dot = key.rfind('.', last_dot - 1);  // "sft.data.text" -> "data.text"
  return is_path(dot == std::string_view::npos ? key : key.substr(dot + 1));
}

int priority_of(std::string_view cls) {
  if (cls == "low") return 0;
  if (cls == "normal") return 1;
  if (cls == "high") return 2;
  return -1;
}

namespace {

result<std::shared_ptr<const toml::table>> parse_template(std::string_view tmpl, std::string_view text) {
  try {
    return std::make_shared<const toml::table>(toml::parse(text, std::string_view(tmpl)));
  } catch (const toml::parse_error& e) {
    return bad(tmpl, "line " + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

// "${stage.NAME.checkpoint}" in reward.model or align.reference must name an
// earlier stage (an rm stage for reward.model); anything else starting "${" is refused.
status check_stage_reference(const std::string& ref, const std::string& key, const std::string& stage,
                             const job_plan& earlier, std::string_view tmpl) {
  if (ref.rfind("${", 0) != 0) return ok_status();
  const std::string open = "${stage.", close = ".checkpoint}";
  const bool shaped = ref.size() > open.size() + close.size() && ref.rfind(open, 0) == 0 &&
                      ref.compare(ref.size() - close.size(), close.size(), close) == 0;
  const std::string name = shaped ? ref.substr(open.size(), ref.size() - open.size() - close.size()) : "";
  const stage_plan* found = nullptr;
  for (const auto& s : earlier.stages)
    if (s.name == name) found = &s;
  if (!found)
    return bad(tmpl, "stage " + stage + ": " + key + " \"" + ref +
                         "\" must be \"${stage.NAME.checkpoint}\" naming an earlier stage of this job");
  if (key == "reward.model" && found->spec.kind != "rm")
    return bad(tmpl, "stage " + stage + ": reward.model names stage " + name + " of kind \"" + found->spec.kind +
                         "\", not an rm stage");
  return ok_status();
}

// An hpo stage: its [hpo] as the template wrote it (errors at the template's
// lines), then as resolved (after --set), and every trial's run config. The
// stage's sizing is the trial that needs the most memory; its steps, the sweep.
status check_hpo_stage(std::string_view tmpl, std::string_view text, stage_plan& sp) {
  const std::string origin = std::string(tmpl) + ".toml";
  if (text.find("[hpo") != std::string_view::npos)
    if (auto p = read_hpo_stage(text, origin, sp.spec); !p) return bad(tmpl, "stage " + sp.name + ": " + p.err().message);
  auto plan = read_hpo_stage(sp.config_toml, origin + " (stage " + sp.name + ", resolved)", sp.spec);
  if (!plan) return bad(tmpl, "stage " + sp.name + ": " + plan.err().message);
  std::uint64_t most = 0;
  for (std::size_t t = 0; t < plan->trials.size(); ++t) {
    run_config trial;
    if (auto c = trial_config_toml(sp.config_toml, *plan, t, &trial); !c)
      return bad(tmpl, "stage " + sp.name + ": " + c.err().message);
    if (const std::uint64_t need = trial.memory().total(); need > most) {
      most = need;
      sp.sizing_what = "trial " + std::to_string(t) + " (" + plan->trials[t].text() + ")";
      sp.sizing = std::move(trial);
    }
  }
  sp.total_steps = std::uint64_t(plan->trials.size()) * std::uint64_t(plan->spec.asha.max_steps);
  return ok_status();
}

// The stage after an hpo stage runs with the best trial's values: any trial
// may be the best, so each one's values must make a config that stage takes;
// its sizing is the values that need the most memory.
status check_inherited(std::string_view tmpl, const stage_plan& search, stage_plan& next) {
  auto plan = read_hpo_stage(search.config_toml, std::string(tmpl) + ".toml", search.spec);
  if (!plan) return plan.err();
  std::uint64_t most = next.sizing.memory().total();
  for (std::size_t t = 0; t < plan->trials.size(); ++t) {
    auto text = with_overrides(next.config_toml, plan->trials[t].overrides());
    auto c = text ? parse_run_config(*text, std::string(tmpl) + ".toml", {"model.init_from=\"/placed\""})
                  : result<run_config>(text.err());
    if (!c)
      return bad(tmpl, "stage " + next.name + " runs with the best values of hpo stage " + search.name +
                           ", and trial " + std::to_string(t) + "'s (" + plan->trials[t].text() +
                           ") make a config it refuses: " + c.err().message);
    if (const std::uint64_t need = c->memory().total(); need > most) {
      most = need;
      next.sizing_what = "with the values of hpo stage " + search.name + "'s trial " + std::to_string(t) + " (" +
                         plan->trials[t].text() + ")";
      next.sizing = std::move(*c);
    }
  }
  return ok_status();
}

result<job_plan> resolve_parsed(std::string_view tmpl, const toml::table& root,
                                const std::vector<std::string>& overrides, std::string_view text) {
  job_plan plan;
  plan.name = std::string(tmpl);
  plan.priority_class = "normal";
  std::vector<std::string> stage_names = {"pretrain"};
  toml::table base;
  key_lines base_lines;  // "section.key" -> line: the copies below lose their source
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
            if (const std::string why = stage_name_problem(n); !why.empty())
              return bad(tmpl, "job.stages: stage name " + quoted_text(n, 40) + " " + why);
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
    } else if (key == "ingest") {  // import options (template_info.hpp): checked, not run
      if (auto s = read_ingest_table(tmpl, v); !s) return s.err();
    } else if (key == "kind") {
      base.insert_or_assign("kind", v);
      base_lines["kind"] = static_cast<int>(v.source().begin.line);
    } else if (run_sections.count(key)) {
      if (!v.is_table()) return bad(tmpl, "[" + key + "] must be a table");
      base.insert(key, *v.as_table());
      for (auto&& [kk, vv] : *v.as_table())
        base_lines[key + "." + std::string(kk.str())] = static_cast<int>(vv.source().begin.line);
    } else {
      return bad(tmpl,
                 "[" + key + "] is not a section (job, stage, model, data, train, optim, checkpoint, anomaly, parallel, "
                 "diloco, export, align, reward, hpo, ingest)");
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
    if (key == "kind") {
      every.emplace_back(key, value);
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

  for (std::size_t index = 0; index < stage_names.size(); ++index) {
    const std::string& name = stage_names[index];
    toml::table cfg = base;
    key_lines lines = base_lines;
    if (stage_tables)
      if (const toml::table* st = (*stage_tables)[name].as_table())
        for (auto&& [k, v] : *st) {
          if (auto s = set_dotted(cfg, std::string(k.str()), v, tmpl, "[stage." + name + "]"); !s) return s.err();
          lines[std::string(k.str())] = static_cast<int>(v.source().begin.line);
        }
    for (const auto& [dotted, value] : every) {
      auto v = override_value(value);
      if (!v) return bad(tmpl, "--set " + dotted + ": " + v.err().message);
      if (auto s = set_dotted(cfg, dotted, **v, tmpl, "--set " + dotted); !s) return s.err();
      lines.erase(dotted);
    }
    for (const auto& [dotted, value] : own[name]) {
      auto v = override_value(value);
      if (!v) return bad(tmpl, "--set " + name + "." + dotted + ": " + v.err().message);
      if (auto s = set_dotted(cfg, dotted, **v, tmpl, "--set " + name + "." + dotted); !s) return s.err();
      lines.erase(dotted);
    }
    const std::string origin = std::string(tmpl) + ".toml";
    auto spec = read_run_config(cfg, origin, &lines, index > 0);
    if (!spec) return bad(tmpl, "stage " + name + ": " + spec.err().message);
    for (const auto& [key, ref] : {std::pair{"reward.model", spec->align.reward_model},
                                    {"align.reference", spec->align.reference},
                                    {"model.init_from", spec->init_from}})
      if (auto st = check_stage_reference(ref, key, name, plan, tmpl); !st) return st.err();
    for (const auto& [key, path] : spec->input_paths())
      if (path.front() != '/')
        return bad(tmpl, "stage " + name + ": " + key + " " + path +
                             " must be an absolute path (the trainer reads it on its own machine)");
    stage_plan sp;
    sp.name = name;
    sp.spec = std::move(*spec);
    sp.sizing = sp.spec;
    sp.total_steps = static_cast<std::uint64_t>(sp.spec.steps);
    std::ostringstream os;
    os << toml::toml_formatter(cfg);
    sp.config_toml = os.str() + "\n";
    if (sp.spec.kind == "hpo")
      if (auto st = check_hpo_stage(tmpl, text, sp); !st) return st.err();
    plan.stages.push_back(std::move(sp));
  }
  for (std::size_t i = 0; i + 1 < plan.stages.size(); ++i)
    if (plan.stages[i].spec.kind == "hpo")
      if (auto st = check_inherited(tmpl, plan.stages[i], plan.stages[i + 1]); !st) return st.err();
  return plan;
}

}  // namespace

std::string fill_stage_references(std::string_view config_toml, const std::string& job_out_dir) {
  std::string out(config_toml);
  const std::string open = "${stage.", close = ".checkpoint}";
  for (std::size_t at = out.find(open); at != std::string::npos; at = out.find(open, at)) {
    const std::size_t end = out.find(close, at);
    if (end == std::string::npos) break;
    const std::string stage = out.substr(at + open.size(), end - at - open.size());
    const std::string path = job_out_dir + "/" + stage + "/checkpoints";
    out.replace(at, end + close.size() - at, path);
    at += path.size();
  }
  return out;
}

result<job_plan> resolve_template(std::string_view tmpl, std::string_view text,
                                  const std::vector<std::string>& overrides) {
  auto root = parse_template(tmpl, text);
  if (!root) return root.err();
  return resolve_parsed(tmpl, **root, overrides, text);
}

struct template_cache::entry {
  std::shared_ptr<const toml::table> root;
};

template_cache::template_cache(std::size_t capacity) : capacity_(capacity == 0 ? 1 : capacity) {}
template_cache::~template_cache() = default;
template_cache::template_cache(template_cache&&) noexcept = default;
template_cache& template_cache::operator=(template_cache&&) noexcept = default;

result<job_plan> template_cache::resolve(std::string_view tmpl, std::string_view text,
                                         const std::vector<std::string>& overrides) {
  std::string key;
  key.reserve(tmpl.size() + 1 + text.size());
  key.append(tmpl).push_back('\0');
  key.append(text);
  auto it = parsed_.find(key);
  if (it == parsed_.end()) {
    auto root = parse_template(tmpl, text);
    if (!root) return root.err();  // not kept: a bad template is refused each time
    if (parsed_.size() >= capacity_) parsed_.clear();  // a new set of templates: start over
    it = parsed_.emplace(std::move(key), std::make_shared<entry>(entry{std::move(*root)})).first;
    ++misses_;
  } else {
    ++hits_;
  }
  return resolve_parsed(tmpl, *it->second->root, overrides, text);
}

}  // namespace loom::runspec
