// Cross-process, in a real browser (issue 29): drive.js runs Debian's chromium
// headless through puppeteer-core against this test's own cloud (`loom up`)
// and an edge site it enrols: log in, submit pipeline-test from the jobs page
// and watch its loss curve grow until it succeeds, see the new site appear on
// the topology page within 1 s and its link turn red when its trainer stops
// and come back, export a model from the models page, and visit every page
// without a console error. Screenshots land in <build>/console-screenshots.
// Skipped, visibly, where chromium or puppeteer-core is not installed
// (scripts/setup installs both).
#include "tests/support/console_client.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

using namespace loom::test;
using namespace std::chrono_literals;

namespace {
constexpr const char* npm_modules = "/usr/local/lib/edgeloom/npm/node_modules";
constexpr const char* chromium = "/usr/bin/chromium";
}  // namespace

TEST_CASE("in headless chromium the console logs in, runs pipeline-test with a live loss curve, follows a site's link and exports a model") {
  namespace fs = std::filesystem;
  if (!fs::exists(chromium) || !fs::exists(std::string(npm_modules) + "/puppeteer-core")) {
    MESSAGE("LOOM_TEST_SKIPPED: chromium or puppeteer-core is not installed (scripts/setup installs both)");
    return;
  }
  cluster c({"--import-root", "/usr/share/common-licenses"});
  REQUIRE(c.up);
  temp_dir site_home{"loom-site"};
  up_guard site_guard{site_home.path()};
  const std::string shots = std::string(LOOM_TEST_BUILD_DIR) + "/console-screenshots";
  ::setenv("NODE_PATH", npm_modules, 1);
  ::setenv("CONSOLE_URL", ("https://127.0.0.1:" + std::to_string(console_port(c))).c_str(), 1);
  ::setenv("CONSOLE_CERT", console_cert(c).c_str(), 1);
  ::setenv("LOOM", bin("loom").c_str(), 1);
  ::setenv("TOKEN", c.admin().c_str(), 1);
  ::setenv("CLOUD_DIR", c.home.path().c_str(), 1);
  ::setenv("SITE_DIR", site_home.path().c_str(), 1);
  ::setenv("CORPUS", "/usr/share/common-licenses/GPL-3", 1);
  ::setenv("SHOTS", shots.c_str(), 1);
  auto r = run({"/usr/bin/env", "node", LOOM_TEST_SOURCE_DIR "/console_browser/drive.js"}, 420s);
  INFO(r.out << r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("case=browser ok=1") != std::string::npos);
  std::istringstream lines(r.out);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("case=", 0) == 0) std::printf("%s\n", line.c_str());
  for (const char* page : {"login", "overview", "job", "topology", "models", "jobs", "datasets", "sites", "audit"})
    CHECK_MESSAGE(fs::exists(shots + "/" + page + ".png"), page);
}
