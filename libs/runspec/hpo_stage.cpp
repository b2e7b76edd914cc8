#include "libs/runspec/hpo_stage.hpp"
#include "libs/runspec/toml_reader.hpp"

#include <sstream>

namespace loom::runspec {
namespace {

result<toml::table> parse_text(std::string_view text, const std::string& origin) {
  try {
    return toml::parse(text, std::string_view(origin));
  } catch (const toml::parse_error& e) {
    return make_error(errc::invalid_argument,
                      origin + ":" + std::to_string(e.source().begin.line) + ": " + std::string(e.description()));
  }
}

status set_key(toml::table& root, const std::string& kv) {
  const auto eq = kv.find('='), dot = kv.find('.');
  if (eq == std::string::npos || dot == std::string::npos || dot > eq)
    return make_error(errc::invalid_argument, "override " + kv + ": expected section.key=value");
  const std::string sec = kv.substr(0, dot), key = kv.substr(dot + 1, eq - dot - 1);
  auto value = override_value(kv.substr(eq + 1));
  if (!value) return make_error(errc::invalid_argument, "override " + sec + "." + key + ": " + value.err().message);
  if (!root.contains(sec)) root.insert(sec, toml::table{});
  toml::table* t = root[sec].as_table();
  if (!t) return make_error(errc::invalid_argument, "override " + kv + ": " + sec + " is not a table");
  (*value)->visit([&](auto&& v) { t->insert_or_assign(key, v); });
  return ok_status();
}

std::string text_of(const toml::table& t) {
  std::ostringstream os;
  os << toml::toml_formatter(t);
  return os.str() + "\n";
}

}  // namespace

result<hpo_stage_plan> read_hpo_stage(std::string_view toml, const std::string& origin, const run_config& stage) {
  auto spec = hpo::parse_hpo(toml, origin);
  if (!spec) return spec.err();
  hpo_stage_plan p{std::move(*spec), {}};
  if (p.spec.asha.max_steps == 0) p.spec.asha.max_steps = stage.steps;
  if (auto st = p.spec.asha.validate(); !st)
    return make_error(errc::invalid_argument, origin + ": [hpo] " + st.err().message +
                                                  " (max_steps defaults to train.steps, " +
                                                  std::to_string(stage.steps) + ")");
  auto trials = p.spec.trial_configs();
  if (!trials) return make_error(errc::invalid_argument, origin + ": [hpo] " + trials.err().message);
  p.trials = std::move(*trials);
  return p;
}

result<std::string> trial_config_toml(std::string_view stage_toml, const hpo_stage_plan& plan, std::size_t trial,
                                      run_config* parsed) {
  auto root = parse_text(stage_toml, "hpo stage");
  if (!root) return root.err();
  root->erase("hpo");
  root->insert_or_assign("kind", "lm");
  std::vector<std::string> sets = plan.trials[trial].overrides();
  sets.push_back("train.steps=" + std::to_string(plan.spec.asha.max_steps));
  for (const auto& kv : sets)
    if (auto st = set_key(*root, kv); !st) return st.err();
  std::string text = text_of(*root);
  const std::string name = "trial " + std::to_string(trial) + " (" + plan.trials[trial].text() + ")";
  auto c = parse_run_config(text, name);
  if (!c) return c.err();
  if (parsed) *parsed = std::move(*c);
  return text;
}

result<std::string> with_overrides(std::string_view config_toml, const std::vector<std::string>& overrides) {
  auto root = parse_text(config_toml, "stage config");
  if (!root) return root.err();
  for (const auto& kv : overrides)
    if (auto st = set_key(*root, kv); !st) return st.err();
  return text_of(*root);
}

}  // namespace loom::runspec
