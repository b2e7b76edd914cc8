// The report page from evidence built by hand: its curves carry the job's own
// numbers, text is escaped, nothing is fetched, a long run is thinned.
#include "libs/report/report.hpp"
#include "libs/report/svg.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace loom;
using namespace loom::report;

namespace {
input sample() {
  input in;
  in.e.job = "job-000007";
  in.e.name = "tiny<script>";
  in.e.state = "succeeded";
  in.e.submitted_unix_ns = 1'000'000'000'000'000'000;
  in.e.now_unix_ns = in.e.submitted_unix_ns + 60'000'000'000;
  diagnose::stage_fact s;
  s.name = "pretrain";
  s.state = "succeeded";
  s.started_unix_ns = in.e.submitted_unix_ns + 1'000'000'000;
  s.finished_unix_ns = in.e.submitted_unix_ns + 30'000'000'000;
  for (int i = 1; i <= 5; ++i) s.steps.push_back({std::uint64_t(i), 5.5 - 0.25 * i, 1e-3, 0.5, 1000.5, 3});
  in.e.stages.push_back(s);
  in.e.events.push_back({in.e.submitted_unix_ns + 2'000'000'000, "pretrain", "snapshot", "/d/ckpt/step-5 & <b>"});
  return in;
}
}  // namespace

TEST_CASE("a curve carries the points it draws, exactly, and the page holds every series of a stage") {
  const auto html = render_html(sample());
  CHECK(html.find("data-series=\"pretrain/loss\" data-steps=\"1 2 3 4 5\" data-values=\"5.25 5 4.75 4.5 4.25\"") !=
        std::string::npos);
  for (const char* s : {"pretrain/lr", "pretrain/tokens_per_s", "pretrain/grad_norm"})
    CHECK(html.find(std::string("data-series=\"") + s + "\"") != std::string::npos);
  CHECK(html.find("class=\"timeline\"") != std::string::npos);
}

TEST_CASE("a cross-site stage has one loss curve per site, from the points the scheduler saw") {
  auto in = sample();
  diagnose::stage_fact d;
  d.name = "diloco";
  d.state = "running";
  d.sites.push_back({"south", "trainer@s", 40, 4, 3.5, 0, 4, 0, 0, 0, {{10, 6.0}, {20, 5.0}, {40, 3.5}}});
  d.sites.push_back({"east", "trainer@e", 30, 3, 4.0, 0, 3, 0, 0, 0, {{15, 5.5}, {30, 4.0}}});
  d.sites.push_back({"west", "trainer@w", 0, 0, 0, 0, 0, 0, 0, 0, {}});  // nothing reported yet: no curve
  in.e.stages.push_back(d);
  const auto html = render_html(in);
  CHECK(html.find("data-series=\"diloco/site/south/loss\" data-steps=\"10 20 40\" data-values=\"6 5 3.5\"") !=
        std::string::npos);
  CHECK(html.find("data-series=\"diloco/site/east/loss\" data-steps=\"15 30\" data-values=\"5.5 4\"") !=
        std::string::npos);
  CHECK(html.find("diloco/site/west/loss") == std::string::npos);
}

TEST_CASE("the page escapes what the job says and fetches nothing") {
  const auto html = render_html(sample());
  CHECK(html.find("tiny&lt;script&gt;") != std::string::npos);
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("&amp; &lt;b&gt;") != std::string::npos);
  CHECK(html.find("http://") == std::string::npos);
  CHECK(html.find("https://") == std::string::npos);
  CHECK(html.find(" src=") == std::string::npos);
}

TEST_CASE("a long run is thinned to at most 2000 points, its first and last kept, and non-finite values left out of the line") {
  std::vector<point> all;
  for (std::uint64_t i = 1; i <= 100000; ++i) all.push_back({i, double(i)});
  const auto t = thin(all);
  CHECK(t.size() == 2000);
  CHECK(t.front().step == 1);
  CHECK(t.back().step == 100000);
  const auto svg = curve("x", "x", {{1, 1.0}, {2, std::nan("")}, {3, 3.0}});
  CHECK(svg.find("1 non-finite left out") != std::string::npos);
  CHECK(svg.find("data-values=\"1 nan 3\"") != std::string::npos);
}
