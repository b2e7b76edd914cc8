// Cross-process: every template under templates/ runs through `loom up`. Each
// industry template imports its own sample corpus with `loom data import
// --template industry/NAME` (its [ingest] options reach ingest: profile, PII,
// dedup, JSONL field; flags override them) and runs its pretrain -> SFT
// pipeline for 3 steps a stage; every training template runs 2 steps a stage.
// Both at the pipeline-test shape (2 layers, 64 wide): the templates' own
// sizes (4 x 256 up to GPT-2 124M) are checked by resolving them
// (runspec_tests), and a d12 step alone takes minutes on this machine's CPU.
#include "libs/runspec/template_info.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// LOOM_SOURCE_DIR, not __FILE__ (relative under ccache's base_dir); passed as
// --templates so the test does not depend on where the build dir lies.
const std::string templates_dir = LOOM_SOURCE_DIR "/templates";
const char* corpus = "/usr/share/common-licenses/GPL-3";

// The pipeline-test shape, so that ~40 stages fit in a few minutes on 2 cores; each
// template keeps its own grad_accum and [parallel] group (loom up --trainers 2).
std::vector<std::string> tiny(int steps) {
  std::vector<std::string> out;
  for (std::string kv : {"model.layers=2", "model.heads=2", "model.channels=64", "model.max_seq_len=64", "seq_len=32",
                         "batch=2", "threads=1", "checkpoint.every_steps=0"}) {
    out.push_back("--set");
    out.push_back(kv);
  }
  out.push_back("--set");
  out.push_back("steps=" + std::to_string(steps));
  return out;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::string submit(const std::string& home, const std::string& tmpl, std::vector<std::string> extra) {
  std::vector<std::string> args = {"job", "submit", "--templates", templates_dir, "--template", tmpl};
  args.insert(args.end(), extra.begin(), extra.end());
  auto j = loom_json(home, args);
  INFO(tmpl);
  REQUIRE(j.contains("id"));
  return j["id"].get<std::string>();
}

json wait_done(const std::string& home, const std::string& id, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  json j;
  while (std::chrono::steady_clock::now() < deadline) {
    j = loom_json(home, {"job", "show", id});
    const std::string st = j.value("state", "");
    if (st == "succeeded" || st == "failed" || st == "cancelled") break;
    std::this_thread::sleep_for(250ms);
  }
  return j;
}

void check_succeeded(const json& j, const std::string& tmpl, std::uint64_t steps) {
  INFO(tmpl << ": " << j.dump());
  CHECK(j.value("state", "") == "succeeded");
  REQUIRE(j.contains("stages"));
  for (const auto& s : j["stages"]) {
    CHECK(s["state"] == "succeeded");
    CHECK(s["step"] == steps);
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

TEST_CASE("every industry template imports its sample with loom data import --template and runs pretrain then SFT") {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(templates_dir + "/industry"))
    if (fs::exists(e.path() / "template.toml")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 10);

  temp_dir home;
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up", "--import-root", templates_dir + "/industry", "--trainers", "2"}, 60s).code == 0);

  for (const auto& n : names) {
    INFO(n);
    const std::string dir = templates_dir + "/industry/" + n;
    auto ingest = runspec::read_ingest_section("industry/" + n, slurp(dir + "/template.toml"));
    REQUIRE(ingest.ok());
    int code = -1;
    auto j = loom_json(home.path(),
                       {"data", "import", dir + "/sample", "--dataset", n, "--template", "industry/" + n, "--templates",
                        templates_dir},
                       120s, &code);
    REQUIRE(code == 0);
    CHECK(j["state"] == "succeeded");
    CHECK(j["kept"].get<int>() >= 10);
    // The template's [ingest] options reached ingest.
    const json& r = j["report"];
    CHECK(r["options"]["profile"] == ingest->profile);
    CHECK(r["options"]["pii"] == ingest->pii.value_or(true));
    CHECK(r["options"]["dedup"] == ingest->dedup.value_or(true));
    if (ingest->pii.value_or(true)) CHECK(r["pii"]["items_redacted"].get<int>() > 0);  // the samples' fake contacts
    CHECK(r["annotations"]["sft_valid"].get<int>() >= 5);  // chat records for the SFT stage
    CHECK(r["output"]["documents"].get<int>() > r["annotations"]["sft_valid"].get<int>());  // text too (field read)
  }
  // An explicit flag overrides the template; a template without [ingest], or
  // files of a format the template does not accept, are refused before any import.
  int code = -1;
  auto over = loom_json(home.path(),
                        {"data", "import", templates_dir + "/industry/clinical-notes/sample", "--dataset", "notes-raw",
                         "--template", "industry/clinical-notes", "--no-pii", "--templates", templates_dir},
                        120s, &code);
  CHECK(code == 0);
  CHECK(over["report"]["options"]["pii"] == false);
  auto none = run_loom(home.path(), {"data", "import", templates_dir + "/industry/legal/sample", "--dataset", "x",
                                     "--template", "pipeline-tiny", "--templates", templates_dir});
  CHECK(none.code != 0);
  CHECK(none.err.find("template pipeline-tiny") != std::string::npos);
  CHECK(none.err.find("has no [ingest] section") != std::string::npos);
  auto fmt = run_loom(home.path(), {"data", "import", templates_dir + "/industry/legal/sample", "--dataset", "x",
                                    "--template", "industry/code", "--templates", templates_dir});
  CHECK(fmt.code != 0);
  CHECK(fmt.err.find("accepts only jsonl files") != std::string::npos);
  CHECK(fmt.err.find("clauses-01.txt (text)") != std::string::npos);
  MESSAGE("imports: " << seconds_since(t0) << " s");

  std::vector<std::pair<std::string, std::string>> jobs;  // name, id
  for (const auto& n : names) {
    auto extra = tiny(3);
    extra.insert(extra.end(), {"--set", "dataset=" + n});
    jobs.emplace_back(n, submit(home.path(), "industry/" + n, extra));
  }
  for (const auto& [n, id] : jobs) {
    auto j = wait_done(home.path(), id, 240s);
    check_succeeded(j, "industry/" + n, 3);
    CHECK(j["stages"].size() == 2);
  }
  MESSAGE("industry templates: " << names.size() << " imports and pipelines in " << seconds_since(t0) << " s");
}

TEST_CASE("every training template is listed with its summary, shown, and runs two steps a stage") {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(templates_dir))
    if (e.path().extension() == ".toml") names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  REQUIRE(names.size() >= 12);

  temp_dir home;
  up_guard guard{home.path()};
  auto listed = loom_json(home.path(), {"templates", "--templates", templates_dir});
  REQUIRE(listed["templates"].size() >= names.size() + 10);
  for (const auto& t : listed["templates"]) {
    INFO(t.dump());
    CHECK(t["about"].get<std::string>().rfind(t["name"].get<std::string>() + ": ", 0) == 0);
  }
  auto shown = loom_json(home.path(), {"templates", "show", "industry/legal", "--templates", templates_dir});
  CHECK(shown["header"].size() >= 3);
  CHECK(shown["ingest"]["pii"] == true);
  REQUIRE(shown["stages"].size() == 2);
  CHECK(shown["stages"][1]["kind"] == "sft");
  CHECK(shown["stages"][0]["layers"] == 4);
  CHECK(shown["stages"][0]["config"].get<std::string>().find("[model]") != std::string::npos);
  CHECK(shown["data_placeholder"] == true);
  auto d12 = loom_json(home.path(), {"templates", "show", "pipeline-d12", "--set", "dataset=web", "--templates", templates_dir});
  CHECK(d12["stages"][0]["parameters"].get<double>() > 120e6);
  CHECK(d12["stages"][0]["data"]["dataset"] == "web");
  CHECK(d12["data_placeholder"] == false);

  REQUIRE(run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses", "--trainers", "2"}, 60s).code == 0);
  // Continued pretraining and SFT-only templates start from pretrain-tiny's result.
  auto from_checkpoint = [](const std::string& n) { return n.rfind("continued-", 0) == 0 || n.rfind("sft-", 0) == 0; };
  // dpo and rl templates start from a byte-level model (vocab 256): rm-tiny's
  // backbone stands in for the SFT parent a user would name.
  auto from_byte_model = [](const std::string& n) { return n.rfind("dpo-", 0) == 0 || n.rfind("rl-", 0) == 0; };
  // rl: train.batch must hold whole groups of samples_per_prompt.
  auto rl_group = [](std::vector<std::string>& extra) { extra.insert(extra.end(), {"--set", "align.samples_per_prompt=2"}); };
  std::vector<std::pair<std::string, std::string>> jobs;
  for (const auto& n : names)
    if (!from_checkpoint(n) && !from_byte_model(n)) {
      auto extra = tiny(2);
      if (n.find("rl") != std::string::npos) rl_group(extra);
      extra.insert(extra.end(), {"--set", std::string("text=") + corpus});
      // DiLoCo ones: as many sites as this deployment has trainers, one fragment
      // per shrunk layer at most (the aggregator runs them through the real rounds).
      if (n.find("diloco") != std::string::npos)
        extra.insert(extra.end(), {"--set", "diloco.sites=2", "--set", "diloco.fragments=1", "--set",
                                   "diloco.inner_steps=1"});
      // hpo ones: one trial of 2 steps (a search of one trial is a run to R).
      if (n.rfind("hpo-", 0) == 0)
        extra.insert(extra.end(), {"--set", "hpo.trials=1", "--set", "hpo.min_steps=2", "--set", "hpo.max_steps=2"});
      jobs.emplace_back(n, submit(home.path(), n, extra));
    }
  std::string base, bytes_base;
  for (const auto& [n, id] : jobs)
    if (n == "pretrain-tiny" || n == "rm-tiny") {
      auto j = wait_done(home.path(), id, 240s);
      check_succeeded(j, n, 2);
      (n == "rm-tiny" ? bytes_base : base) = j["stages"][0]["checkpoint"].get<std::string>();
    }
  REQUIRE(!base.empty());
  REQUIRE(!bytes_base.empty());
  for (const auto& n : names)
    if (from_byte_model(n)) {
      auto extra = tiny(2);
      extra.insert(extra.end(), {"--set", "model.init_from=" + bytes_base});
      if (n.rfind("rl-", 0) == 0) rl_group(extra);
      jobs.emplace_back(n, submit(home.path(), n, extra));
    }
  for (const auto& n : names)
    if (from_checkpoint(n)) {
      auto extra = tiny(2);
      extra.insert(extra.end(), {"--set", std::string("text=") + corpus, "--set", "model.init_from=" + base});
      jobs.emplace_back(n, submit(home.path(), n, extra));
    }
  for (const auto& [n, id] : jobs) {
    const json j = wait_done(home.path(), id, 240s);
    check_succeeded(j, n, 2);
    if (n == "pretrain-small-gang") CHECK(j["stages"][0]["min_trainers"] == 2);  // its [parallel] group held
    if (n == "pretrain-tiny-elastic") CHECK(j["stages"][0]["max_trainers"] == 2);
  }
  MESSAGE("training templates: " << names.size() << " jobs in " << seconds_since(t0) << " s");
}
