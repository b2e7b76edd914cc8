// `loom templates [show T]`: the job templates this machine has. The listing
// shows each one's summary (its first comment line); `show` prints the whole
// header comment (when to use it), each stage's kind, size, steps and data
// source, the [ingest] section of an industry template, and the config each
// stage resolves to (runspec::resolve_template, as the scheduler will; --set
// overrides apply as at submit).
#include "client/cli.hpp"
#include "client/templates.hpp"

#include "libs/runspec/job_template.hpp"
#include "libs/runspec/template_info.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace loom::cli {
namespace {

using nlohmann::json;

// Stands in for the data source at show when neither the template nor --set names one.
constexpr const char* placeholder_dataset = "DATASET";

std::uint64_t parameters(const model::gpt2_config& m) {
  std::uint64_t n = 0;
  for (int t = 0; t < model::num_tensors; ++t) {
    std::uint64_t e = 1;
    for (auto d : model::tensor_shape(m, static_cast<model::tensor_id>(t))) e *= d;
    n += e;
  }
  return n;
}

std::string joined(const std::vector<std::string>& v, const char* empty) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s.empty() ? empty : s;
}

json stage_json(const runspec::stage_plan& st) {
  const auto& s = st.spec;
  json data = json::object();
  for (const auto& [k, v] : {std::pair{"dataset", s.dataset}, {"text", s.text}, {"sft", s.sft}, {"shards", s.shards},
                             {"tokenizer", s.tokenizer}, {"init_from", s.init_from}})
    if (!v.empty()) data[k] = v;
  data["format"] = s.format;
  return {{"name", st.name},
          {"kind", s.kind},
          {"layers", s.model.layers},
          {"heads", s.model.heads},
          {"channels", s.model.channels},
          {"max_seq_len", s.model.max_seq_len},
          {"parameters", parameters(s.model)},
          {"steps", s.steps},
          {"batch", s.batch},
          {"seq_len", s.seq_len},
          {"grad_accum", s.grad_accum},
          {"lr", s.lr},
          {"data", data},
          {"config", st.config_toml}};
}

json ingest_json(const runspec::ingest_settings& g) {
  json j = {{"profile", g.profile.empty() ? "default" : g.profile},
            {"deny_licences", g.deny_licences},
            {"pii", g.pii.value_or(true)},
            {"dedup", g.dedup.value_or(true)},
            {"text_field", g.text_field.empty() ? "text" : g.text_field},
            {"formats", g.formats}};
  return j;
}

int show(context& c, const std::string& name) {
  auto t = find_template(c, name);
  if (!t) return fail(c, t.err());
  std::vector<std::string> overrides;
  bool has_source = false;
  for (const auto& kv : c.a.all("set")) {
    overrides.push_back(absolute_override(kv));
    const std::string key = kv.substr(0, kv.find('='));
    for (const char* s : {"dataset", "text", "sft", "shards"})
      if (key == s || key.ends_with(std::string(".") + s)) has_source = true;
  }
  auto plan = runspec::resolve_template(t->name, t->text, overrides);
  bool placeholder = false;
  if (!plan && !has_source && plan.err().message.find("set exactly one of data.") != std::string::npos) {
    overrides.push_back(std::string("dataset=") + placeholder_dataset);  // the template leaves it to submit
    plan = runspec::resolve_template(t->name, t->text, overrides);
    placeholder = true;
  }
  if (!plan) return fail(c, plan.err());
  auto ingest = runspec::read_ingest_section(t->name, t->text);
  if (!ingest) return fail(c, ingest.err());
  json stages = json::array();
  for (const auto& st : plan->stages) stages.push_back(stage_json(st));
  if (c.json) {
    json j = {{"name", t->name}, {"path", t->path}, {"header", runspec::template_header(t->text)},
              {"job", plan->name}, {"priority", plan->priority_class}, {"stages", stages},
              {"data_placeholder", placeholder}};
    if (ingest->present) j["ingest"] = ingest_json(*ingest);
    print_json(j);
    return ok_exit;
  }
  std::printf("%s  (%s)\n", printable(t->name).c_str(), printable(t->path).c_str());
  for (const auto& line : runspec::template_header(t->text)) std::printf("  %s\n", printable(line).c_str());
  std::printf("\njob %s, %s priority, %zu stage%s:\n", printable(plan->name).c_str(), plan->priority_class.c_str(),
              plan->stages.size(), plan->stages.size() == 1 ? "" : "s");
  for (const auto& s : stages) {
    std::string data;
    for (auto& [k, v] : s["data"].items()) data += (data.empty() ? "" : " ") + k + "=" + v.get<std::string>();
    std::printf("  %-9s kind %-4s %2d layers x %4d channels (%d heads, %.1f M parameters)  %6d steps of %d x %d x %d  "
                "data: %s\n",
                printable(s["name"].get<std::string>()).c_str(), s["kind"].get<std::string>().c_str(),
                s["layers"].get<int>(), s["channels"].get<int>(), s["heads"].get<int>(),
                s["parameters"].get<double>() / 1e6, s["steps"].get<int>(), s["batch"].get<int>(),
                s["seq_len"].get<int>(), s["grad_accum"].get<int>(), printable(data).c_str());
  }
  if (placeholder)
    std::printf("  (no data source in the template: shown with dataset=%s; give --set dataset=NAME, text=FILE or "
                "sft=FILE at submit)\n",
                placeholder_dataset);
  if (ingest->present) {
    const json g = ingest_json(*ingest);
    std::printf("\ningest (`loom data import PATH --dataset N --template %s`; flags override):\n"
                "  profile %s, deny licences %s, pii %s, dedup %s, JSONL text field %s, formats %s\n",
                printable(t->name).c_str(), g["profile"].get<std::string>().c_str(),
                printable(joined(ingest->deny_licences, "none (report only)")).c_str(),
                g["pii"].get<bool>() ? "redacted" : "kept", g["dedup"].get<bool>() ? "on" : "off",
                printable(g["text_field"].get<std::string>()).c_str(),
                printable(joined(ingest->formats, "all")).c_str());
  }
  for (const auto& s : stages)
    std::printf("\n--- stage %s: resolved config ---\n%s", printable(s["name"].get<std::string>()).c_str(),
                indented_lines(s["config"].get<std::string>(), "").c_str());
  return ok_exit;
}

}  // namespace

int cmd_templates(context& c) {
  const auto& pos = c.a.positional;
  if (pos.size() >= 2) {
    if (pos[1] != "show" || pos.size() != 3) return usage("usage: loom templates [show TEMPLATE [--set k=v]...]");
    return show(c, pos[2]);
  }
  json all = json::array();
  for (const auto& t : list_templates(c))
    all.push_back({{"name", t.name}, {"path", t.path}, {"about", runspec::template_summary(t.text)}});
  if (c.json) {
    print_json({{"templates", all}});
  } else {
    for (const auto& t : all) {
      const std::string name = t["name"].get<std::string>();
      std::string about = t["about"].get<std::string>();
      if (about.rfind(name + ": ", 0) == 0) about.erase(0, name.size() + 2);  // the header names it: once is enough
      std::printf("%-28s %s\n", printable(name).c_str(), printable(about).c_str());
    }
  }
  return ok_exit;
}

}  // namespace loom::cli
