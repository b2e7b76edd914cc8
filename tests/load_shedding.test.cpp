// Cross-process: load shedding through `loom up` with two trainer processes
// (issue 30, item 3). Memory pressure is injected through LOOM_PRESSURE_FILE
// (libs/runtime/pressure.hpp), which every trainer reads once a second:
//   high       each running stage halves its micro-batch (tokens per step
//              unchanged): a "load_shed" job event, audited
//   sustained  the scheduler closes the pressed trainers and pauses the
//              lower-priority job (checkpoint + requeue: a "paused" event,
//              audited); the high-priority job runs on
//   ok         the closed trainer opens, the paused job resumes from its
//              checkpoint in the micro-batch it ran in, and ends bitwise equal
//              to the same job run unpressured in that micro-batch.
// The low job's pretrain runs micro-batch 2 x accumulation 2: pressed from
// its first step, it sheds once, to 1 x 4, and has nothing left to lower.
#include "libs/files/files.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/job_watch.hpp"
#include "tests/support/loom_json.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <thread>

using namespace loom;
using namespace loom::test;
using json = nlohmann::json;
using namespace std::chrono_literals;

TEST_CASE("memory pressure halves the micro-batch, then pauses the lower-priority job, which resumes bitwise equal") {
  temp_dir home;
  up_guard guard{home.path()};
  const std::string pressure = home.path() + "/pressure";
  // Pressed from the start: each stage sheds before its first step, so the
  // micro-batch the low job runs in (1) is known in advance.
  REQUIRE(files::write_atomic(pressure, "memory=0.97\n").ok());
  ::setenv("LOOM_PRESSURE_FILE", pressure.c_str(), 1);
  ::setenv("LOOM_SHED_PAUSE_AFTER_S", "2", 1);
  auto up = run_loom(home.path(), {"up", "--trainers", "2", "--import-root", "/usr/share/common-licenses"}, 60s);
  ::unsetenv("LOOM_PRESSURE_FILE");
  ::unsetenv("LOOM_SHED_PAUSE_AFTER_S");
  REQUIRE(up.code == 0);

  const std::vector<std::string> low_args = {"--set", "pretrain.train.steps=200", "--priority", "low", "--set",
                                             "pretrain.train.batch=2", "--set", "pretrain.train.grad_accum=2"};
  const std::string low = submit_pipeline_test(home.path(), low_args);
  const std::string high = submit_pipeline_test(home.path(), {"--set", "pretrain.train.steps=200", "--priority", "high"});
  // Sustained (2 s running while pressed): the low job is paused, the high one runs on.
  std::vector<std::string> low_pre;
  const auto deadline = std::chrono::steady_clock::now() + 180s;
  while (std::chrono::steady_clock::now() < deadline) {
    low_pre = stage_events(home.path(), low, "pretrain");
    if (count_starting(low_pre, "paused: ") > 0) break;
    std::this_thread::sleep_for(200ms);
  }
  INFO(json(low_pre).dump(1));
  REQUIRE(count_starting(low_pre, "paused: load shedding: trainer ") == 1);
  CHECK(count_starting(low_pre, "load_shed: memory 97%") >= 1);
  CHECK(count_starting(low_pre, "load_shed: memory 97% of ") <= 2);  // the halving, then "nothing left" at most once
  bool halved = false;
  for (const auto& e : low_pre)
    halved = halved || e.find("micro-batch 2 -> 1, accumulation 2 -> 4 (128 tokens per step unchanged) from step 1") !=
                           std::string::npos;
  CHECK(halved);
  // `loom status` shows each trainer's gauge (the injected reading).
  const json status = loom_json(home.path(), {"status"});  // held: a range over a temporary's member dangles
  REQUIRE(!status.value("trainers", json::array()).empty());
  for (const auto& t : status["trainers"]) {
    CHECK(t.value("pressure", "") != "ok");
    CHECK(t.value("memory_used", 0.0) == doctest::Approx(0.97));
    CHECK(t.value("isolation", "").starts_with("processes under "));  // stages in processes: the default
  }
  json mid = loom_json(home.path(), {"job", "show", high});
  CHECK(mid["stages"][0]["state"] == "running");  // never paused: the top class of the pressed work
  const auto high_pre = stage_events(home.path(), high, "pretrain");
  CHECK(count_starting(high_pre, "load_shed: ") >= 1);  // 4 -> 2, and on while the pressure lasts
  CHECK(count_starting(high_pre, "paused: ") == 0);

  // The pressure passes: the low job's trainer opens and the job resumes.
  REQUIRE(files::write_atomic(pressure, "memory=0.2\n").ok());
  json high_done = wait_done(home.path(), high);
  CHECK(high_done["state"] == "succeeded");
  json low_done = wait_done(home.path(), low);
  REQUIRE(low_done["state"] == "succeeded");
  CHECK(low_done["stages"][0]["attempts"].get<int>() == 2);
  const auto low_all = stage_events(home.path(), low, "pretrain");
  MESSAGE("the low job's pretrain events: " << json(low_all).dump(1));
  CHECK(count_starting(low_all, "paused: ") == 1);
  CHECK(count_starting(low_all, "load_shed: ") == count_starting(low_pre, "load_shed: "));  // resumed unpressured

  // Each action is in the audit trail.
  auto trail = run_loom(home.path(), {"audit", "trail", low, "--json"}, 30s);
  REQUIRE(trail.code == 0);
  CHECK(trail.out.find("job.paused") != std::string::npos);
  CHECK(trail.out.find("job.load_shed") != std::string::npos);

  // The same job unpressured in micro-batch 1: bitwise what the paused one ended with.
  const std::string ref = submit_pipeline_test(home.path(), {"--set", "pretrain.train.steps=200", "--priority", "low", "--set",
                                               "pretrain.train.batch=1", "--set", "pretrain.train.grad_accum=4"});
  json ref_done = wait_done(home.path(), ref);
  REQUIRE(ref_done["state"] == "succeeded");
  CHECK(count_starting(stage_events(home.path(), ref, "pretrain"), "load_shed: ") == 0);
  CHECK(final_params_sha(low_done, "pretrain") == final_params_sha(ref_done, "pretrain"));
  CHECK(final_params_sha(low_done, "sft") == final_params_sha(ref_done, "sft"));
}
