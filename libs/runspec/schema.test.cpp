// The schema types every key, and path-ness is found by type: every path key
// is recorded when a config sets it (so the rule on files sees it), every
// string key that is not a path is on a reviewed list, and every value in
// every template that looks like a path sits at a key typed path. A path key
// added without the kind, or a string key added without a review, fails here.
#include "libs/hpo/hpo_spec.hpp"
#include "libs/runspec/job_template.hpp"
#include "libs/runspec/schema.hpp"

#include <toml++/toml.h>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

using namespace loom;
using namespace loom::runspec;
namespace fs = std::filesystem;

namespace {

std::string dotted(const key_spec& k) {
  return k.section.empty() ? std::string(k.key) : std::string(k.section) + "." + std::string(k.key);
}

// A small model and its training; `model_extra` goes into [model].
std::string model_toml(const std::string& model_extra = "") {
  return "[model]\nlayers = 2\nheads = 2\nchannels = 32\nmax_seq_len = 16\nvocab = 300\n" + model_extra +
         "[train]\nbatch = 2\nseq_len = 8\nsteps = 20\n";
}

// A config that reads path key `key` (set to "/abs/<key>"), one per path key:
// each needs a kind and a source that make the config valid. (rest, [model] extra)
const std::map<std::string, std::pair<std::string, std::string>>& config_using() {
  static const std::map<std::string, std::pair<std::string, std::string>> m{
      {"model.init_from", {"[data]\ntext = \"/d/t.txt\"\n", "init_from = \"/abs/model.init_from\"\n"}},
      {"data.shards", {"[data]\nshards = \"/abs/data.shards\"\n", ""}},
      {"data.text", {"[data]\ntext = \"/abs/data.text\"\n", ""}},
      {"data.sft", {"[data]\nsft = \"/abs/data.sft\"\n", ""}},
      {"data.prefs", {"kind = \"rm\"\n[data]\nprefs = \"/abs/data.prefs\"\n", ""}},
      {"data.tokenizer", {"[data]\ntext = \"/d/t.txt\"\ntokenizer = \"/abs/data.tokenizer\"\n", ""}},
      {"align.reference",
       {"kind = \"dpo\"\n[data]\nsynthetic_prefs = true\n[align]\nreference = \"/abs/align.reference\"\n",
        "init_from = \"/d/sft\"\n"}},
      {"reward.model",
       {"kind = \"rl\"\n[data]\nsynthetic_prefs = true\n[reward]\nmodel = \"/abs/reward.model\"\n[align]\n"
        "samples_per_prompt = 2\nmax_new_tokens = 4\n",
        "init_from = \"/d/sft\"\n"}},
      {"hpo.validation",
       {"kind = \"hpo\"\n[data]\ntext = \"/d/t.txt\"\n[hpo]\nvalidation = \"/abs/hpo.validation\"\nmin_steps = 5\n"
        "[hpo.space]\n\"optim.lr\" = {log_uniform = [1e-4, 1e-2]}\n",
        ""}},
      {"output.dir", {"[data]\ntext = \"/d/t.txt\"\n[output]\ndir = \"/abs/output.dir\"\n", ""}},
  };
  return m;
}

// The string keys that never name a file, and why (a reviewed list: a new
// string key must be added here, or typed path).
const std::map<std::string, std::string>& not_paths() {
  static const std::map<std::string, std::string> m{
      {"kind", "a stage kind (lm, sft, ...)"},
      {"data.dataset", "an ingested dataset's name; '/' refused"},
      {"data.format", "lm, sft or preference"},
      {"train.precision", "fp32, bf16 or auto"},
      {"diloco.sites", "a count or site names ([a-z0-9-])"},
      {"diloco.codec", "a codec's name"},
      {"diloco.datasets", "dataset names; '/' refused"},
      {"align.loss", "dpo or ipo"},
      {"reward.keywords", "words the reward looks for in completions"},
      {"reward.regex", "a pattern matched against completions"},
      {"hpo.method", "random or grid"},
      {"hpo.space", "a table of distributions (libs/hpo)"},
  };
  return m;
}

bool stringy(value_kind k) {
  return k == value_kind::word || k == value_kind::name || k == value_kind::words || k == value_kind::names ||
         k == value_kind::integer_or_names || k == value_kind::path || k == value_kind::table;
}

// What a value that names a file looks like: absolute, relative with a
// directory part, home-relative, or a file name with a data file's extension.
bool looks_like_path(const std::string& v) {
  if (v.empty()) return false;
  if (v.front() == '/' || v.front() == '~' || v.rfind("./", 0) == 0 || v.rfind("../", 0) == 0) return true;
  if (v.find('/') != std::string::npos && v.find(' ') == std::string::npos) return true;
  for (const char* ext : {".txt", ".json", ".jsonl", ".bin", ".toml", ".safetensors", ".md", ".csv"})
    if (v.size() > std::strlen(ext) && v.compare(v.size() - std::strlen(ext), std::strlen(ext), ext) == 0) return true;
  return false;
}

// Every (key, string value) of a template: run sections, "kind", [stage.X]
// tables ("section.key" = value), [hpo] and [hpo.space]. [job] and [ingest]
// keys come back as "job.KEY" / "ingest.KEY".
void walk(const toml::table& root, const std::function<void(const std::string&, const std::string&)>& each) {
  std::function<void(const std::string&, const toml::node&)> values = [&](const std::string& key, const toml::node& n) {
    if (auto s = n.value_exact<std::string>()) each(key, *s);
    if (const toml::array* a = n.as_array())
      for (const toml::node& e : *a) values(key, e);
    if (const toml::table* t = n.as_table())  // an inline table (hpo.space entries): the key it belongs to
      for (auto&& [k, v] : *t) values(key, v);
  };
  for (auto&& [sec, node] : root) {
    const std::string s(sec.str());
    const toml::table* t = node.as_table();
    if (!t) {
      values(s, node);
      continue;
    }
    if (s == "stage") {
      for (auto&& [stage, st] : *t)
        if (const toml::table* keys = st.as_table())
          for (auto&& [k, v] : *keys) {
            const std::string key(k.str());
            if (const toml::table* sub = v.as_table())  // [stage.NAME.section]
              for (auto&& [kk, vv] : *sub) values(key + "." + std::string(kk.str()), vv);
            else
              values(key, v);
          }
      continue;
    }
    for (auto&& [k, v] : *t) values(s + "." + std::string(k.str()), v);
  }
}

// The keys whose values look like paths but are not typed path.
std::vector<std::string> untyped_paths(const toml::table& root) {
  std::vector<std::string> out;
  walk(root, [&](const std::string& key, const std::string& value) {
    if (!looks_like_path(value)) return;
    const key_spec* k = find_key(key);
    if (!k || k->kind != value_kind::path) out.push_back(key + " = \"" + value + "\"");
  });
  return out;
}

}  // namespace

TEST_CASE("every path key of the schema is recorded when a config sets it, so the rule on files sees it") {
  std::set<std::string> path_keys;
  for (const key_spec& k : schema())
    if (k.kind == value_kind::path) path_keys.insert(dotted(k));
  for (const auto& key : path_keys) {
    INFO(key);
    auto it = config_using().find(key);
    REQUIRE_MESSAGE(it != config_using().end(), "a path key without a row in config_using(): add one");
    // kind must come before the first table: the row's lines that precede its first '[' go first.
    const std::string& row = it->second.first;
    const std::size_t table = row.find('[');
    auto c = parse_run_config(row.substr(0, table) + model_toml(it->second.second) + row.substr(table), "/t/run.toml");
    REQUIRE_MESSAGE(c.ok(), (c.ok() ? "" : c.err().message));
    auto has = [&](const auto& list) {
      return std::count(list.begin(), list.end(), std::pair<std::string, std::string>{key, "/abs/" + key}) == 1;
    };
    CHECK(has(c->path_values));
    CHECK(has(c->input_paths()) == rule_of(find_key(key)->file).read);  // output.dir is written, not read
  }
  CHECK(path_keys.size() == config_using().size());  // no stale rows
}

TEST_CASE("every string key of the schema is typed path or reviewed as one that never names a file") {
  for (const key_spec& k : schema()) {
    if (!stringy(k.kind)) continue;
    INFO(dotted(k));
    if (k.kind == value_kind::path) {
      CHECK(k.file != file_kind::none);
      CHECK_FALSE(not_paths().count(dotted(k)));
    } else {
      CHECK_MESSAGE(not_paths().count(dotted(k)) == 1,
                    "a string key that is not typed path: type it path, or add it to not_paths() with why");
    }
  }
  for (const auto& [key, why] : not_paths()) CHECK_MESSAGE(find_key(key) != nullptr, key);
}

TEST_CASE("every value in every template that looks like a path sits at a key typed path") {
  const fs::path dir = fs::path(LOOM_SOURCE_DIR) / "templates";
  std::size_t files = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file() || e.path().extension() != ".toml") continue;
    INFO(e.path().string());
    std::ifstream in(e.path());
    std::ostringstream os;
    os << in.rdbuf();
    const toml::table root = toml::parse(os.str(), e.path().string());
    CHECK(untyped_paths(root).empty());
    ++files;
  }
  CHECK(files >= 22);
  // The walk catches one: a path in a key that is not typed path, in a section or a stage table.
  CHECK(untyped_paths(toml::parse("[data]\ndataset = \"/etc/passwd\"\n")) ==
        std::vector<std::string>{"data.dataset = \"/etc/passwd\""});
  CHECK(untyped_paths(toml::parse("[stage.sft]\n\"reward.regex\" = \"../x.txt\"\n")).size() == 1);
  CHECK(untyped_paths(toml::parse("[data]\ntext = \"/d/t.txt\"\n[hpo]\nvalidation = \"/d/h.txt\"\n")).empty());
}

TEST_CASE("the schema types every key of [hpo] that libs/hpo reads, hpo.validation as a held-out text") {
  std::set<std::string> schema_hpo, hpo_keys;
  for (const key_spec& k : schema())
    if (k.section == "hpo") schema_hpo.insert(std::string(k.key));
  for (auto k : hpo::hpo_keys()) hpo_keys.insert(std::string(k));
  CHECK(schema_hpo == hpo_keys);
  CHECK(find_key("hpo.validation")->file == file_kind::held_out_text);
}

TEST_CASE("every file kind of a path key has a cap (or is a directory) and a reason") {
  for (const key_spec& k : schema()) {
    if (k.kind != value_kind::path) continue;
    INFO(dotted(k));
    const file_rule& r = rule_of(k.file);
    CHECK(r.kind == k.file);
    CHECK(!r.what.empty());
    CHECK(!r.why.empty());
    CHECK((r.directory || r.max_bytes > 0));
  }
  CHECK(rule_of(file_kind::held_out_text).max_bytes == 16ull << 20);
  CHECK(rule_of(file_kind::text).max_bytes == 1ull << 30);
}

TEST_CASE("a path key's word is no path, and the schema answers by section and key or by dotted name") {
  auto c = parse_run_config(model_toml() + "[data]\ntext = \"/d/t.txt\"\ntokenizer = \"bytes\"\n", "/t/run.toml");
  REQUIRE(c.ok());
  CHECK(c->tokenizer == "bytes");  // a path key's word
  CHECK(c->input_paths() == std::vector<std::pair<std::string, std::string>>{{"data.text", "/d/t.txt"}});
  CHECK(find_key("data.text")->kind == value_kind::path);
  CHECK(find_key("data", "no_such_key") == nullptr);
  CHECK(find_key("kind")->kind == value_kind::word);
}
