// The trainer's work states: every allowed transition, every refused one
// (and that a refusal changes nothing), what PollWork reports in each.
#include "services/trainer/work_state.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::trainer;

namespace {
work_state::stage_ref ref() { return {"job-000001", "pretrain", 2, 0, 1, 0, 30}; }
}  // namespace

TEST_CASE("a stage goes idle, preparing, running, done and back to idle, reporting running until done") {
  work_state w;
  CHECK(w.report() == "idle");
  REQUIRE(w.assign(ref()).ok());
  CHECK(w.view().phase == work_phase::preparing);
  CHECK(w.report() == "running");  // the scheduler hears "running" at once
  CHECK(w.view().job == "job-000001");
  CHECK(w.view().total_steps == 30);
  REQUIRE(w.started().ok());
  w.progress(1, 10.5, 100);
  w.progress(2, 9.5, 120);
  w.snapshot("/jobs/j/pretrain/checkpoints/step-000002");
  CHECK(w.view().first_loss == 10.5);
  CHECK(w.view().loss == 9.5);
  CHECK(w.view().step == 2);
  REQUIRE(w.finish("succeeded").ok());
  CHECK(w.view().phase == work_phase::done);
  CHECK(w.report() == "succeeded");
  CHECK(w.view().checkpoint.find("step-000002") != std::string::npos);
  REQUIRE(w.reported().ok());
  CHECK(w.report() == "idle");
  CHECK(w.view().job.empty());
}

TEST_CASE("a stop while preparing or running ends stopped, and a second stop is harmless") {
  for (bool run : {false, true}) {
    work_state w;
    REQUIRE(w.assign(ref()).ok());
    if (run) REQUIRE(w.started().ok());
    REQUIRE(w.stop().ok());
    CHECK(w.stop().ok());
    CHECK(w.view().phase == work_phase::stopping);
    CHECK(w.report() == "running");
    if (!run) CHECK(w.finish("succeeded").code() == errc::conflict);  // it never ran a step
    REQUIRE(w.finish("stopped").ok());
    CHECK(w.report() == "stopped");
  }
}

TEST_CASE("a stage whose last step came before the stop succeeded") {
  work_state w;
  REQUIRE(w.assign(ref()).ok());
  REQUIRE(w.started().ok());
  REQUIRE(w.stop().ok());
  REQUIRE(w.finish("succeeded").ok());
  CHECK(w.report() == "succeeded");
}

TEST_CASE("a failed exchange regroups from preparing, running or stopping, keeping its reason") {
  work_state w;
  REQUIRE(w.assign(ref()).ok());
  REQUIRE(w.started().ok());
  REQUIRE(w.exchange_failed("peer t2 silent for 120 s").ok());
  CHECK(w.view().phase == work_phase::regrouping);
  CHECK(w.finish("failed").code() == errc::conflict);
  REQUIRE(w.finish("regroup").ok());
  CHECK(w.report() == "regroup");
  CHECK(w.view().message == "peer t2 silent for 120 s");
}

TEST_CASE("failures end a stage from preparing, running or stopping with their message") {
  for (int at = 0; at < 3; ++at) {
    work_state w;
    REQUIRE(w.assign(ref()).ok());
    if (at >= 1) REQUIRE(w.started().ok());
    if (at == 2) REQUIRE(w.stop().ok());
    REQUIRE(w.finish("failed", "data.dataset x: not found").ok());
    CHECK(w.report() == "failed");
    CHECK(w.view().message == "data.dataset x: not found");
  }
}

TEST_CASE("transitions out of order are refused as conflicts and change nothing") {
  work_state w;
  CHECK(w.started().code() == errc::conflict);
  CHECK(w.stop().code() == errc::conflict);
  CHECK(w.finish("failed").code() == errc::conflict);
  CHECK(w.reported().code() == errc::conflict);
  CHECK(w.exchange_failed("x").code() == errc::conflict);
  CHECK(w.view().phase == work_phase::idle);
  REQUIRE(w.assign(ref()).ok());
  auto again = w.assign(ref());
  CHECK(again.code() == errc::conflict);
  CHECK(again.err().message.find("while preparing (job-000001/pretrain)") != std::string::npos);
  CHECK(w.finish("succeeded").code() == errc::conflict);  // not started
  CHECK(w.finish("stopped").code() == errc::conflict);    // not asked to stop
  CHECK(w.finish("regroup").code() == errc::conflict);
  CHECK(w.finish("exploded").code() == errc::invalid_argument);
  CHECK(w.reported().code() == errc::conflict);
  CHECK(w.view().phase == work_phase::preparing);
  w.progress(5, 1.0, 1.0);  // not running yet: ignored
  CHECK(w.view().step == 0);
}

TEST_CASE("a work_board shares one state between threads") {
  work_board b;
  REQUIRE(b.with([](work_state& w) { return w.assign(ref()); }).ok());
  CHECK(b.view().phase == work_phase::preparing);
}

TEST_CASE("TrainerStatus shows the job to admins and its tenant, the phase alone to another tenant") {
  work_state w;
  auto r = ref();
  r.tenant = "acme";
  REQUIRE(w.assign(r).ok());
  REQUIRE(w.started().ok());
  w.progress(3, 2.5, 100);
  w.snapshot("/data/jobs/job-000001/pretrain/checkpoints/step-000003");
  auto own = shown_to(w.view(), false, "acme");
  CHECK_FALSE(own.withheld);
  CHECK(own.view.job == "job-000001");
  CHECK(own.view.step == 3);
  auto admin = shown_to(w.view(), true, "default");
  CHECK_FALSE(admin.withheld);
  CHECK(admin.view.checkpoint == "/data/jobs/job-000001/pretrain/checkpoints/step-000003");
  w.host("processes under cgroup v1: memory <= 1.4 GiB, cpu <= 1 core", "high", 0.93);
  auto other = shown_to(w.view(), false, "globex");
  CHECK(other.withheld);
  CHECK(other.view.phase == work_phase::running);
  CHECK(other.view.isolation == "processes under cgroup v1: memory <= 1.4 GiB, cpu <= 1 core");  // the host's: shown
  CHECK(other.view.pressure == "high");
  CHECK(other.view.memory_used == doctest::Approx(0.93));
  CHECK(other.view.job.empty());
  CHECK(other.view.stage.empty());
  CHECK(other.view.checkpoint.empty());
  CHECK(other.view.step == 0);
  CHECK(other.view.tenant.empty());
  // The host's facts outlive the stage.
  REQUIRE(w.finish("succeeded").ok());
  REQUIRE(w.reported().ok());
  CHECK(w.view().job.empty());
  CHECK(w.view().pressure == "high");
  // Idle: nothing to withhold from anyone.
  work_state idle;
  CHECK_FALSE(shown_to(idle.view(), false, "globex").withheld);
}
