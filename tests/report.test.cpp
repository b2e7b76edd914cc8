// Cross-process: `loom report` (issue 31 item 3) on a real job through `loom
// up`: the page is one self-contained file whose curves hold the job's own
// points (each series' data attributes = its metrics log, step for step), and
// it renders in Debian's headless chromium without a console error or any
// request beyond the file; a screenshot lands under the build dir.
#include "libs/files/files.hpp"
#include "tests/support/byte_template.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

constexpr const char* npm_modules = "/usr/local/lib/edgeloom/npm/node_modules";
constexpr const char* chromium = "/usr/bin/chromium";

const byte_gpt tiny{.name = "report-tiny", .steps = 40, .every_steps = 20};

// The metrics log's series `key` by step.
std::vector<std::pair<std::uint64_t, double>> logged(const std::string& path, const std::string& key) {
  std::vector<std::pair<std::uint64_t, double>> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (j.is_object()) out.emplace_back(j.value("step", std::uint64_t{0}), j.value(key, 0.0));
  }
  return out;
}

// The series a curve of the page holds: data-steps and data-values of <svg data-series="NAME">.
std::vector<std::pair<std::uint64_t, double>> shown(const std::string& html, const std::string& name) {
  std::vector<std::pair<std::uint64_t, double>> out;
  const std::regex re("data-series=\"" + name + "\" data-steps=\"([^\"]*)\" data-values=\"([^\"]*)\"");
  std::smatch m;
  if (!std::regex_search(html, m, re)) return out;
  std::istringstream steps(m[1].str()), values(m[2].str());
  std::uint64_t s = 0;
  double v = 0;
  while (steps >> s && values >> v) out.emplace_back(s, v);
  return out;
}

}  // namespace

TEST_CASE("loom report writes one self-contained page whose curves hold the job's points, and it renders in headless chromium") {
  temp_dir home{"loom-report"}, tdir{"loom-report-templates"}, out{"loom-report-out"};
  up_guard guard{home.path()};
  REQUIRE(files::write_atomic(tdir.path() + "/report-tiny.toml", byte_template(tiny)).ok());
  auto up = run_loom(home.path(), {"up", "--import-root", "/usr/share/common-licenses"}, 90s);
  REQUIRE_MESSAGE(up.code == 0, up.out << up.err);
  auto sub = loom_json(home.path(), {"job", "submit", "--templates", tdir.path(), "--template", "report-tiny", "--set",
                                     "text=/usr/share/common-licenses/GPL-3"});
  REQUIRE(sub.contains("id"));
  const std::string id = sub["id"].get<std::string>();
  auto done = wait_done(home.path(), id, 120s);
  REQUIRE(done.value("state", "") == "succeeded");

  const std::string page = out.path() + "/report.html";
  auto r = run_loom(home.path(), {"report", id, "--out", page}, 60s);
  REQUIRE_MESSAGE(r.code == 0, r.out << r.err);
  auto html = files::read_file(page);
  REQUIRE(html.ok());
  CHECK(html->find("<script") == std::string::npos);
  CHECK(html->find("http://") == std::string::npos);
  CHECK(html->find("https://") == std::string::npos);
  CHECK(html->find(id) != std::string::npos);
  for (const char* section : {"Diagnosis", "Stages", "Timeline", "Curves", "Config and data", "Checkpoints",
                              "Model versions", "Events", "Audit trail"})
    CHECK_MESSAGE(html->find(std::string(">") + section + "<") != std::string::npos, section);
  CHECK(html->find("mv-0") != std::string::npos);  // the stage's registered version

  // Each curve is the metrics log's series, step for step, value for value.
  const std::string metrics = done["out_dir"].get<std::string>() + "/pretrain/metrics.jsonl";
  for (const auto& [series, key] : std::vector<std::pair<std::string, std::string>>{
           {"loss", "loss"}, {"lr", "lr"}, {"tokens_per_s", "tokens_per_s"}, {"grad_norm", "grad_norm"}}) {
    const auto want = logged(metrics, key), got = shown(*html, "pretrain/" + series);
    INFO(series);
    REQUIRE(want.size() == 40);
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) {
      CHECK(got[i].first == want[i].first);
      CHECK(got[i].second == doctest::Approx(want[i].second).epsilon(1e-6));
    }
  }

  if (!fs::exists(chromium) || !fs::exists(std::string(npm_modules) + "/puppeteer-core")) {
    MESSAGE("LOOM_TEST_SKIPPED: chromium or puppeteer-core is not installed (scripts/setup installs both)");
    return;
  }
  const std::string shots = std::string(LOOM_TEST_BUILD_DIR) + "/report-screenshots";
  fs::create_directories(shots);
  ::setenv("NODE_PATH", npm_modules, 1);
  ::setenv("REPORT", page.c_str(), 1);
  ::setenv("SHOT", (shots + "/report.png").c_str(), 1);
  auto b = run({"/usr/bin/env", "node", LOOM_TEST_SOURCE_DIR "/report_browser/check.js"}, 120s);
  INFO(b.out << b.err);
  CHECK(b.code == 0);
  CHECK(b.out.find("case=report_browser errors=0 requests=0 curves=4") != std::string::npos);
  CHECK(fs::file_size(shots + "/report.png") > 10000);
  // What chromium reads back from the page: the loss curve's points, all drawn.
  const auto at = b.out.find("curves=");
  REQUIRE(at != std::string::npos);
  auto curves = json::parse(b.out.substr(at + 7, b.out.find('\n', at) - at - 7), nullptr, false);
  REQUIRE(curves.is_array());
  REQUIRE(curves.size() == 4);
  CHECK(curves[0]["series"] == "pretrain/loss");
  CHECK(curves[0]["drawn"] == 40);
  const auto loss = logged(metrics, "loss");
  for (std::size_t i = 0; i < loss.size(); ++i)
    CHECK(curves[0]["values"][i].get<double>() == doctest::Approx(loss[i].second).epsilon(1e-6));
  std::printf("case=report bytes=%zu\n", html->size());
}
