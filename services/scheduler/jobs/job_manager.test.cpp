// The job manager without a store: submit, placement on live trainers, progress,
// stage switch, trainer restart and loss, cancel. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {

constexpr const char* two_stages = "[job]\nstages = [\"pretrain\", \"sft\"]\n[train]\nsteps = 10\n";

struct fixture : testing::job_fixture {
  const job_rec* submit(const std::string& req, const char* tmpl = two_stages) { return submit_template(req, tmpl); }
  poll_answer poll(const std::string& node, const std::string& state, const std::string& job = "",
                   const std::string& stage = "", std::uint64_t step = 0) {
    poll_report r;
    r.node = node;
    r.state = state;
    r.job = job;
    r.stage = stage;
    r.step = step;
    r.loss = 5.0 - 0.1 * double(step);
    r.checkpoint = step ? "/jobs/" + job + "/" + stage + "/checkpoints/step-" + std::to_string(step) : "";
    return jobs.poll(r, now);
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "a job runs its stages in order on a trainer, the second from the first's checkpoint") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  CHECK(j->id == "job-000001");
  CHECK(j->state == "running");
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[1].state == "pending");

  auto a = poll("trainer@a", "idle");
  REQUIRE(a.work);
  CHECK(a.work->job == "job-000001");
  CHECK(a.work->stage == "pretrain");
  CHECK(a.work->out_dir == "/jobs/job-000001/pretrain");
  CHECK(a.work->init_from.empty());
  CHECK(a.work->config_toml.find("steps = 10") != std::string::npos);

  CHECK(poll("trainer@a", "running", j->id, "pretrain", 5).work);
  CHECK(j->stages[0].step == 5);
  CHECK(!poll("trainer@a", "succeeded", j->id, "pretrain", 10).work);
  CHECK(j->stages[0].state == "succeeded");
  CHECK(j->stages[1].state == "running");  // placed at once on the freed trainer
  auto b = poll("trainer@a", "idle");
  REQUIRE(b.work);
  CHECK(b.work->stage == "sft");
  CHECK(b.work->init_from == "/jobs/job-000001/pretrain/checkpoints");
  poll("trainer@a", "running", j->id, "sft", 3);
  poll("trainer@a", "succeeded", j->id, "sft", 10);
  CHECK(j->state == "succeeded");
  CHECK(!poll("trainer@a", "idle").work);
}

TEST_CASE_FIXTURE(fixture, "submit is idempotent by request id and refuses a bad template") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* a = submit("same");
  const job_rec* b = submit("same");
  CHECK(a == b);
  CHECK(jobs.list("").size() == 1);
  submit_args bad;
  bad.template_name = "t";
  bad.template_toml = "[nope]\n";
  auto r = jobs.submit(bad, "other", "alice", now);
  REQUIRE(!r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(jobs.list("").size() == 1);
}

TEST_CASE_FIXTURE(fixture, "a job waits for a trainer, and a second job waits for the first") {
  const job_rec* j1 = submit("r1", "[train]\nsteps = 3\n");
  CHECK(j1->state == "queued");
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  CHECK(j1->state == "running");
  const job_rec* j2 = submit("r2", "[train]\nsteps = 3\n");
  CHECK(j2->state == "queued");
  poll("trainer@a", "idle");
  poll("trainer@a", "succeeded", j1->id, "pretrain", 3);
  CHECK(j1->state == "succeeded");
  CHECK(j2->state == "running");
}

TEST_CASE_FIXTURE(fixture, "a restarted trainer gets its stage again and a lost one's stage moves to another") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  poll("trainer@a", "idle");
  poll("trainer@a", "running", j->id, "pretrain", 4);
  // kill -9 and restart: the trainer polls idle while the scheduler still has its assignment.
  auto again = poll("trainer@a", "idle");
  REQUIRE(again.work);
  CHECK(again.work->stage == "pretrain");
  CHECK(j->stages[0].attempts == 2);
  poll("trainer@a", "running", j->id, "pretrain", 6);

  // trainer@a stops heartbeating; trainer@b is alive: the stage moves there after 3 missed beats.
  add_trainer("trainer@b");
  now += 5s;
  nodes.heartbeat("trainer@b", now);
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[0].node == "trainer@b");
  CHECK(j->stages[0].attempts == 3);
  auto moved = poll("trainer@b", "idle");
  REQUIRE(moved.work);
  CHECK(moved.work->out_dir == "/jobs/job-000001/pretrain");  // same directory: resumes from its checkpoints
}

TEST_CASE_FIXTURE(fixture, "cancel stops a running stage at the trainer's next poll") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  poll("trainer@a", "idle");
  poll("trainer@a", "running", j->id, "pretrain", 2);
  auto c = jobs.cancel(j->id, "user asked", now);
  REQUIRE(c.ok());
  CHECK(j->state == "cancelled");
  CHECK(j->stages[0].state == "cancelled");
  CHECK(j->stages[1].state == "cancelled");
  CHECK(poll("trainer@a", "running", j->id, "pretrain", 3).stop);
  CHECK(!poll("trainer@a", "idle").work);
  CHECK(jobs.cancel(j->id, "", now).code() == errc::conflict);
  CHECK(jobs.cancel("job-999999", "", now).code() == errc::not_found);
}

TEST_CASE_FIXTURE(fixture, "a failed stage fails the job and cancels the stages after it") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  poll("trainer@a", "idle");
  poll_report r;
  r.node = "trainer@a";
  r.state = "failed";
  r.job = j->id;
  r.stage = "pretrain";
  r.message = "train.bogus is not a known key";
  jobs.poll(r, now);
  CHECK(j->state == "failed");
  CHECK(j->message.find("train.bogus") != std::string::npos);
  CHECK(j->stages[1].state == "cancelled");
}

TEST_CASE("events of an unknown job are not_found") {
  // Covered with a real store in tests/jobs.test.cpp (kill -9 of the scheduler);
  // here: without a store, events() of an unknown job is not_found.
  job_manager jobs{nullptr, "/jobs"};
  CHECK(jobs.events("job-000001", 0).code() == errc::not_found);
}

TEST_CASE("a high-priority job preempts a low one only after its minimum runtime, and the low one resumes after it") {
  fixture f;
  f.jobs = job_manager{nullptr, "/jobs", 60s};
  std::vector<std::string> events;  // "job stage kind: text", as the service would audit them
  f.jobs.set_event_sink([&](const job_rec& j, const job_event& e) {
    events.push_back(j.id + " " + e.stage + " " + e.kind + ": " + e.text);
  });
  f.add_trainer("trainer@a");
  f.jobs.tick(f.nodes, f.now);
  auto submit = [&](const std::string& req, const std::string& cls) {
    submit_args a;
    a.template_name = "t";
    a.template_toml = "[train]\nsteps = 100\n";
    a.priority_class = cls;
    auto r = f.jobs.submit(a, req, "alice", f.now);
    REQUIRE(r.ok());
    return r->first;
  };
  const job_rec* low = submit("low", "low");
  REQUIRE(f.poll("trainer@a", "idle").work);
  CHECK(f.poll("trainer@a", "running", low->id, "pretrain", 5).work);

  // 30 s in: the high job waits, the low one keeps running.
  f.now += 30s;
  f.nodes.heartbeat("trainer@a", f.now);  // alive all along
  const job_rec* high = submit("high", "high");
  f.jobs.tick(f.nodes, f.now);
  CHECK(high->state == "queued");
  CHECK(low->stages[0].state == "running");
  CHECK(f.poll("trainer@a", "running", low->id, "pretrain", 10).work);

  // Past the minimum runtime: the low job is preempted (requeued, not failed)
  // and the high one takes the trainer once the low one has stopped.
  f.now += 31s;
  f.nodes.heartbeat("trainer@a", f.now);
  f.jobs.tick(f.nodes, f.now);
  CHECK(high->state == "running");
  CHECK(low->stages[0].state == "queued");
  CHECK(low->state == "running");  // the job is alive; its stage waits for room
  auto stop = f.poll("trainer@a", "running", low->id, "pretrain", 12);
  CHECK(stop.stop);
  CHECK(!stop.work);
  auto next = f.poll("trainer@a", "stopped", low->id, "pretrain", 12);
  REQUIRE(next.work);
  CHECK(next.work->job == high->id);

  // The high job ends; the low one is placed again and resumes from its checkpoints.
  f.poll("trainer@a", "running", high->id, "pretrain", 50);
  f.poll("trainer@a", "succeeded", high->id, "pretrain", 100);
  CHECK(high->state == "succeeded");
  CHECK(low->stages[0].state == "running");
  auto back = f.poll("trainer@a", "idle");
  REQUIRE(back.work);
  CHECK(back.work->job == low->id);
  CHECK(back.work->out_dir == "/jobs/" + low->id + "/pretrain");
  int preempted = 0;
  for (const auto& e : events)
    preempted += e.starts_with(low->id + " pretrain requeued: preempted for a higher-priority job");
  CHECK(preempted == 1);
  f.poll("trainer@a", "succeeded", low->id, "pretrain", 100);
  CHECK(low->state == "succeeded");
}

TEST_CASE_FIXTURE(fixture, "a drained trainer finishes its stage and is given nothing new") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j1 = submit("r1", "[train]\nsteps = 3\n");
  REQUIRE(poll("trainer@a", "idle").work);
  const job_rec* j2 = submit("r2", "[train]\nsteps = 3\n");
  CHECK(j2->state == "queued");
  REQUIRE(nodes.drain("trainer@a"));
  jobs.tick(nodes, now);
  CHECK(poll("trainer@a", "running", j1->id, "pretrain", 1).work);  // keeps running its stage
  poll("trainer@a", "succeeded", j1->id, "pretrain", 3);
  CHECK(j1->state == "succeeded");
  CHECK(j2->state == "queued");  // not placed on the draining trainer
  CHECK(!poll("trainer@a", "idle").work);
  add_trainer("trainer@b");  // another trainer takes it
  jobs.tick(nodes, now);
  CHECK(j2->state == "running");
  auto w = poll("trainer@b", "idle");
  REQUIRE(w.work);
  CHECK(w.work->job == j2->id);
}
