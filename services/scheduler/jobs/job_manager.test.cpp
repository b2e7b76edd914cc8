// The job manager without a store: submit, placement on live trainers, progress,
// stage switch, trainer restart and loss, cancel. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include "libs/auth/token.hpp"
#include "libs/ckpt/snapshot.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <algorithm>

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
  // Stage 0 of j runs at `step` on its trainer, which then misses its
  // heartbeats for 10 s while the trainers in `beating` keep beating; the
  // tick notices. Returns the trainer lost.
  std::string lose_stage_trainer(const job_rec* j, std::uint64_t step, const std::vector<std::string>& beating) {
    const std::string on = j->stages[0].node;
    REQUIRE(!on.empty());
    poll(on, "idle");
    poll(on, "running", j->id, "pretrain", step);
    now += 10s;
    for (const auto& n : beating)
      if (n != on) nodes.heartbeat(n, now);
    jobs.tick(nodes, now);
    return on;
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
  CHECK(jobs.list("", as("")).size() == 1);
  submit_args bad;
  bad.template_name = "t";
  bad.template_toml = "[nope]\n";
  auto r = jobs.submit(bad, as("other", "[nope]"), nodes, now);
  REQUIRE(!r.ok());
  CHECK(r.code() == errc::invalid_argument);
  CHECK(jobs.list("", as("")).size() == 1);
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
  auto c = jobs.cancel(j->id, "user asked", as("c1"), now);
  REQUIRE(c.ok());
  CHECK(j->state == "cancelled");
  CHECK(j->stages[0].state == "cancelled");
  CHECK(j->stages[1].state == "cancelled");
  CHECK(poll("trainer@a", "running", j->id, "pretrain", 3).stop);
  CHECK(!poll("trainer@a", "idle").work);
  CHECK(jobs.cancel(j->id, "", as("c2"), now).code() == errc::conflict);
  CHECK(jobs.cancel("job-999999", "", as("c3"), now).code() == errc::not_found);
}

// The policy places the queued job on the room the cancel frees in the same
// pass: those placements are the cancel's to apply (dropped, the job stayed
// queued while the policy took it for running, until the roster next changed).
TEST_CASE_FIXTURE(fixture, "cancelling a running job places the job queued behind it at once") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* running = submit("r1");
  const job_rec* waiting = submit("r2");
  CHECK(running->state == "running");
  CHECK(waiting->state == "queued");
  REQUIRE(jobs.cancel(running->id, "user asked", as("c1"), now).ok());
  CHECK(waiting->state == "running");
  CHECK(waiting->stages[0].state == "running");
  CHECK(waiting->stages[0].node == "trainer@a");
  CHECK(poll("trainer@a", "running", running->id, "pretrain", 3).stop);
  CHECK(poll("trainer@a", "idle").work);  // the trainer is given the waiting job's stage
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
    submit_args a = fixture::args("[train]\nsteps = 100\n");
    a.priority_class = cls;
    auto r = f.jobs.submit(a, fixture::as(req, cls), f.nodes, f.now);
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
  REQUIRE(nodes.set_drained("trainer@a", true));
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

TEST_CASE_FIXTURE(fixture, "request ids are per principal, and one reused for another request is a conflict") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  auto a = jobs.submit(args(two_stages), as("r1", "body-a", "alice"), nodes, now);
  auto b = jobs.submit(args(two_stages), as("r1", "body-a", "bob"), nodes, now);
  REQUIRE((a.ok() && b.ok()));
  CHECK(a->first != b->first);  // bob's r1 is not alice's
  CHECK(a->first->principal == "alice");
  auto retry = jobs.submit(args(two_stages), as("r1", "body-a", "alice"), nodes, now);
  REQUIRE(retry.ok());
  CHECK(retry->second);  // existed
  CHECK(retry->first == a->first);
  auto other = jobs.submit(args(two_stages, {"steps=3"}), as("r1", "body-b", "alice"), nodes, now);
  REQUIRE(!other.ok());
  CHECK(other.code() == errc::conflict);
  CHECK(other.err().message.find("request id r1 was used by alice") != std::string::npos);
  CHECK(jobs.list("", as("", "", "root", "admin")).size() == 2);
}

TEST_CASE_FIXTURE(fixture, "a retried cancel answers what the first one did, a new one on a cancelled job is a conflict") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  auto first = jobs.cancel(j->id, "stop", as("cancel-1", "c"), now);
  REQUIRE(first.ok());
  auto again = jobs.cancel(j->id, "stop", as("cancel-1", "c"), now);
  REQUIRE(again.ok());
  CHECK((*again)->state == "cancelled");
  CHECK(jobs.cancel(j->id, "stop", as("cancel-2", "c"), now).code() == errc::conflict);
  CHECK(jobs.cancel(j->id, "stop", as("cancel-1", "other body"), now).code() == errc::conflict);
}

TEST_CASE_FIXTURE(fixture, "jobs belong to the token's tenant: operators act within it, admins across") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  auto mine = jobs.submit(args(two_stages), as("r1", "x", "alice", "operator", "red"), nodes, now);
  REQUIRE(mine.ok());
  CHECK(mine->first->tenant == "red");
  const std::string id = mine->first->id;
  auto blue = as("b1", "y", "bob", "operator", "blue");
  CHECK(jobs.find_for(id, blue).code() == errc::not_found);
  CHECK(jobs.list("", blue).empty());
  CHECK(jobs.cancel(id, "mine now", blue, now).code() == errc::not_found);
  CHECK(jobs.find(id)->state != "cancelled");
  auto elsewhere = args(two_stages);
  elsewhere.tenant = "red";
  auto denied = jobs.submit(elsewhere, blue, nodes, now);
  REQUIRE(!denied.ok());
  CHECK(denied.code() == errc::permission_denied);
  auto viewer = as("v1", "z", "carol", "viewer", "red");
  CHECK(jobs.find_for(id, viewer).ok());
  CHECK(jobs.cancel(id, "", viewer, now).code() == errc::permission_denied);
  auto admin = as("a1", "w", "root", "admin", "blue");
  CHECK(jobs.list("", admin).size() == 1);
  CHECK(jobs.cancel(id, "by the admin", admin, now).ok());
}

TEST_CASE_FIXTURE(fixture, "a stage whose trainer stops answering twice fails instead of being placed again") {
  add_trainer("trainer@a");
  add_trainer("trainer@b");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  REQUIRE(j->stages[0].state == "running");
  for (int lost = 1; lost <= 2; ++lost) {
    const std::string on = j->stages[0].node;
    REQUIRE(!on.empty());
    poll(on, "idle");
    poll(on, "running", j->id, "pretrain", 1);
    now += 10s;  // every trainer misses its heartbeats; the other comes back
    for (const auto& n : {"trainer@a", "trainer@b"})
      if (n != on) nodes.heartbeat(n, now);
    jobs.tick(nodes, now);
    if (lost == 1) {
      CHECK(j->stages[0].node_losses == 1);
      CHECK(j->stages[0].state == "running");  // re-placed on the other trainer
      CHECK(j->stages[0].node != on);
      nodes.heartbeat(on, now);
      jobs.tick(nodes, now);
    }
  }
  CHECK(j->stages[0].state == "failed");
  CHECK(j->state == "failed");
  CHECK(j->message.find("stopped answering 2 times") != std::string::npos);
  CHECK(j->message.find("train.threads") != std::string::npos);
  CHECK(j->stages[1].state == "cancelled");
}

// Found by the chaos harness: two link cuts of a few seconds (or a kill -9 and
// a clock step) while the stage trained on between them failed the job as a
// crash loop. A loss after progress counts as the first.
TEST_CASE_FIXTURE(fixture, "a stage that trained on between two losses of its trainer is placed again, one lost twice at one step fails") {
  add_trainer("trainer@a");
  add_trainer("trainer@b");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  REQUIRE(j->stages[0].state == "running");
  auto lose = [&](std::uint64_t step) {
    const std::string on = lose_stage_trainer(j, step, {"trainer@a", "trainer@b"});
    nodes.heartbeat(on, now);  // back (a link healed, a restart)
    jobs.tick(nodes, now);
  };
  lose(3);
  CHECK(j->stages[0].node_losses == 1);
  lose(9);  // trained from 3 to 9 since: not a loop
  CHECK(j->stages[0].node_losses == 1);
  CHECK(j->stages[0].state == "running");
  lose(9);  // lost again at the same step: a loop
  CHECK(j->stages[0].state == "failed");
  CHECK(j->message.find("stopped answering 2 times") != std::string::npos);
}

// The diagnose test's hung host: a stage that trains a while on each trainer
// and then hangs it (SIGSTOP) is not forgiven for its progress, because the
// trainer it hung before has not come back.
TEST_CASE_FIXTURE(fixture, "a stage that trained on but left its earlier trainer gone for good fails when it loses the next") {
  add_trainer("trainer@a");
  add_trainer("trainer@b");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  REQUIRE(j->stages[0].state == "running");
  // The first hangs for good; the other beats.
  const std::string first = lose_stage_trainer(j, 3, {"trainer@a", "trainer@b"});
  const std::string second = first == "trainer@a" ? "trainer@b" : "trainer@a";
  REQUIRE(j->stages[0].state == "running");
  REQUIRE(j->stages[0].node == second);
  CHECK(j->stages[0].node_losses == 1);
  // Trained twenty steps there, then that one hangs too; the first is still gone.
  lose_stage_trainer(j, 23, {});
  CHECK(j->stages[0].state == "failed");
  CHECK(j->message.find("stopped answering 2 times") != std::string::npos);
}

// The chaos harness's open finding (issue 32): a link cut longer than the
// death window, twice in one stage with no step between, failed the job as a
// crash loop. The trainer's own word when it registers again tells a cut
// link (silent, its loop on time) from a stopped or starved process.
TEST_CASE_FIXTURE(fixture, "a trainer back from a cut link takes its loss back, one whose own loop ran late does not") {
  std::vector<std::string> kinds;
  jobs.set_event_sink([&](const job_rec&, const job_event& e) { kinds.push_back(e.kind); });
  add_trainer("trainer@a");
  add_trainer("trainer@b");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  REQUIRE(j->stages[0].state == "running");
  // Lost at step 3, the other trainer takes it; then the first is back and says why.
  auto lose = [&] { return lose_stage_trainer(j, 3, {"trainer@a", "trainer@b"}); };
  auto count = [&](const std::string& k) { return std::count(kinds.begin(), kinds.end(), k); };
  SUBCASE("cut off: silent 11 s, on time") {
    const std::string first = lose();
    REQUIRE(j->stages[0].node_losses == 1);
    nodes.heartbeat(first, now);
    jobs.cut_off(first, 11s, 20ms, now);
    CHECK(j->stages[0].node_losses == 0);
    CHECK(count("cut_off") == 1);
    jobs.cut_off(first, 11s, 20ms, now);  // said twice: taken back once
    CHECK(count("cut_off") == 1);
    lose();  // the other lost at the same step: the first loss of the two
    CHECK(j->stages[0].state == "running");
    CHECK(j->stages[0].node_losses == 1);
  }
  SUBCASE("stopped: its loop ran 9 s late") {
    const std::string first = lose();
    nodes.heartbeat(first, now);
    jobs.cut_off(first, 11s, 9s, now);
    CHECK(j->stages[0].node_losses == 1);
    CHECK(count("stalled") == 1);
    lose();
    CHECK(j->stages[0].state == "failed");
  }
  SUBCASE("a silence that began after the loss does not cover it") {
    const std::string first = lose();
    now += 30s;
    nodes.heartbeat(first, now);
    for (const auto& n : {"trainer@a", "trainer@b"}) nodes.heartbeat(n, now);
    jobs.cut_off(first, 4s, 0ms, now);
    CHECK(j->stages[0].node_losses == 1);
    CHECK(count("cut_off") == 0);
  }
}

TEST_CASE_FIXTURE(fixture, "a trainer's notices become job events once each and are acknowledged") {
  std::vector<std::string> kinds;
  jobs.set_event_sink([&](const job_rec&, const job_event& e) { kinds.push_back(e.kind + ": " + e.text); });
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  poll("trainer@a", "idle");
  poll_report r;
  r.node = "trainer@a";
  r.state = "running";
  r.job = j->id;
  r.stage = "pretrain";
  r.notices = {{100, "snapshot_fallback", "step-000004 refused (MANIFEST.json signature mismatch); resumed from step-000002"},
               {101, "rollback", "step 7: loss nan: rolled back to step 4"}};
  CHECK(jobs.poll(r, now).notices_acked == 101);
  CHECK(jobs.poll(r, now).notices_acked == 101);  // resent: not recorded twice
  int fallbacks = 0, rollbacks = 0;
  for (const auto& k : kinds) {
    fallbacks += k.rfind("snapshot_fallback: step-000004 refused", 0) == 0;
    rollbacks += k.rfind("rollback: step 7", 0) == 0;
  }
  CHECK(fallbacks == 1);
  CHECK(rollbacks == 1);
}

TEST_CASE_FIXTURE(fixture, "placement puts a stage only on a trainer with the memory it needs, and says so while it waits") {
  const job_rec* j = submit("r1");  // no trainer yet: admission leaves it to placement
  add_trainer("trainer@small", 1ull << 30);  // GPT-2 small needs more than its 768 MiB
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "queued");
  CHECK(jobs.waiting(*j, 0, nodes, now).find("needs an estimated") != std::string::npos);
  add_trainer("trainer@big");
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[0].node == "trainer@big");
  CHECK(jobs.waiting(*j, 0, nodes, now).empty());
}

TEST_CASE_FIXTURE(fixture, "a stage that ends between two polls keeps the rate its trainer reported with the end") {
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1");
  poll("trainer@a", "idle");
  poll_report r;
  r.node = "trainer@a";
  r.state = "succeeded";
  r.job = j->id;
  r.stage = "pretrain";
  r.step = 10;
  r.loss = 4.5;
  r.tokens_per_s = 1234.5;
  jobs.poll(r, now);
  CHECK(j->stages[0].state == "succeeded");
  CHECK(j->stages[0].tokens_per_s == 1234.5);
}

TEST_CASE_FIXTURE(fixture, "an rl stage gets the checkpoints its stage references name, not the previous stage's") {
  constexpr const char* rlhf =
      "[job]\nstages = [\"pretrain\", \"rm\", \"rl\"]\n[train]\nsteps = 10\nbatch = 8\n"
      "[stage.rm]\nkind = \"rm\"\n\"data.synthetic_prefs\" = true\n"
      "[stage.rl]\nkind = \"rl\"\n\"data.synthetic_prefs\" = true\n\"align.samples_per_prompt\" = 4\n"
      "\"model.init_from\" = \"${stage.pretrain.checkpoint}\"\n\"reward.model\" = \"${stage.rm.checkpoint}\"\n";
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r-rlhf", rlhf);
  REQUIRE(poll("trainer@a", "idle").work);
  poll("trainer@a", "succeeded", j->id, "pretrain", 10);
  auto rm = poll("trainer@a", "idle");
  REQUIRE(rm.work);
  CHECK(rm.work->init_from == "/jobs/job-000001/pretrain/checkpoints");  // the previous stage's, as ever
  poll("trainer@a", "succeeded", j->id, "rm", 10);
  auto rl = poll("trainer@a", "idle");
  REQUIRE(rl.work);
  CHECK(rl.work->stage == "rl");
  CHECK(rl.work->init_from.empty());  // the config names its start itself
  CHECK(rl.work->config_toml.find("init_from = '/jobs/job-000001/pretrain/checkpoints'") != std::string::npos);
  CHECK(rl.work->config_toml.find("model = '/jobs/job-000001/rm/checkpoints'") != std::string::npos);
  CHECK(rl.work->config_toml.find("${") == std::string::npos);
}

TEST_CASE_FIXTURE(fixture, "a stage whose final checkpoint fails the check, or lies outside its stage dir, fails instead of succeeding") {
  std::vector<std::string> checked;
  jobs.set_checkpoint_check([&](const std::string& dir) -> status {
    checked.push_back(dir);
    if (dir.find("step-10") != std::string::npos)
      return make_error(errc::corruption, "MANIFEST.json signature mismatch");
    return ok_status();
  });
  add_trainer("trainer@a");
  jobs.tick(nodes, now);
  const job_rec* bad = submit("r1", "[train]\nsteps = 10\n");
  poll("trainer@a", "idle");
  poll("trainer@a", "succeeded", bad->id, "pretrain", 10);
  CHECK(bad->state == "failed");
  CHECK(bad->stages[0].state == "failed");
  CHECK(bad->message == "stage pretrain: its final checkpoint does not verify: MANIFEST.json signature mismatch");
  // Another job's checkpoint (another tenant's, signed with the same key) is never this stage's result.
  const job_rec* other = submit("r2", "[train]\nsteps = 9\n");
  poll("trainer@a", "idle");
  poll_report r;
  r.node = "trainer@a";
  r.state = "succeeded";
  r.job = other->id;
  r.stage = "pretrain";
  r.step = 9;
  r.checkpoint = "/jobs/" + bad->id + "/pretrain/checkpoints/step-9";
  jobs.poll(r, now);
  CHECK(other->state == "failed");
  CHECK(other->message.find("is not under its stage directory /jobs/" + other->id + "/pretrain") != std::string::npos);
  r.checkpoint = "/jobs/" + other->id + "/pretrain/../../" + bad->id + "/pretrain/checkpoints/step-9";
  const job_rec* third = submit("r3", "[train]\nsteps = 9\n");
  poll("trainer@a", "idle");
  r.job = third->id;
  jobs.poll(r, now);
  CHECK(third->state == "failed");
  // Its own, verified: it succeeds.
  const job_rec* good = submit("r4", "[train]\nsteps = 9\n");
  poll("trainer@a", "idle");
  poll("trainer@a", "succeeded", good->id, "pretrain", 9);
  CHECK(good->state == "succeeded");
  CHECK(checked.back() == "/jobs/" + good->id + "/pretrain/checkpoints/step-9");
}

TEST_CASE("the cloud's manifest check passes a snapshot signed with its key and refuses one signed with another") {
  files::temp_dir dir("loom-manifest");
  const std::string mine = dir.path() + "/checkpoint.key", theirs = dir.path() + "/site.key";
  REQUIRE(auth::create_token_key(mine).ok());
  REQUIRE(auth::create_token_key(theirs).ok());
  auto publish = [&](const std::string& root, const std::string& key_path) {
    ckpt::snapshot_writer w;
    REQUIRE(w.begin(root, 7).ok());
    REQUIRE(w.add_file("model.safetensors", "not really tensors").ok());
    auto d = w.publish(auth::load_token_key(key_path).value(), 1'700'000'000);
    REQUIRE(d.ok());
    return *d;
  };
  const auto check = manifest_check(mine);
  CHECK(check(publish(dir.path() + "/a", mine)).ok());
  auto foreign = check(publish(dir.path() + "/b", theirs));
  CHECK(foreign.code() == errc::corruption);
  CHECK(foreign.err().message.find("signature mismatch") != std::string::npos);
  CHECK(check(dir.path() + "/a").code() == errc::invalid_argument);  // not a step-N directory
  CHECK(check(dir.path() + "/none/step-000007").code() == errc::corruption);  // no manifest there
  CHECK(manifest_check(dir.path() + "/missing.key")(dir.path() + "/a/step-000007").code() != errc::ok);
}

TEST_CASE("sustained pressure closes the pressed trainers and pauses the lowest-priority work there, never the top class") {
  fixture f;
  std::vector<std::string> events;
  f.jobs.set_event_sink([&](const job_rec& j, const job_event& e) {
    events.push_back(j.id + " " + e.stage + " " + e.kind + ": " + e.text);
  });
  f.add_trainer("trainer@a");
  f.add_trainer("trainer@b");
  f.jobs.tick(f.nodes, f.now);
  auto submit = [&](const std::string& req, const std::string& cls) {
    submit_args a = fixture::args("[job]\nstages = [\"pretrain\"]\n[train]\nsteps = 100\n");
    a.priority_class = cls;
    auto r = f.jobs.submit(a, fixture::as(req, cls), f.nodes, f.now);
    REQUIRE(r.ok());
    return r->first;
  };
  const job_rec* low = submit("low", "low");
  const job_rec* high = submit("high", "high");
  const std::string low_node = low->stages[0].node, high_node = high->stages[0].node;
  REQUIRE(low_node != high_node);
  auto poll = [&](const std::string& node, const std::string& state, const job_rec* j, const std::string& level) {
    poll_report r;
    r.node = node;
    r.state = state;
    if (j) {
      r.job = j->id;
      r.stage = "pretrain";
      r.step = 5;
    }
    r.pressure_level = level;
    r.pressure_why = level == "ok" ? "" : "memory 96% of 8.0 GiB (/proc/meminfo) >= 90%";
    if (level == "sustained") r.pressure_why += " for 30 s";
    return f.jobs.poll(r, f.now);
  };
  auto tick = [&](std::chrono::seconds dt) {
    f.now += dt;
    f.nodes.heartbeat("trainer@a", f.now);
    f.nodes.heartbeat("trainer@b", f.now);
    f.jobs.tick(f.nodes, f.now);
  };
  REQUIRE(poll(low_node, "idle", nullptr, "ok").work);
  REQUIRE(poll(high_node, "idle", nullptr, "ok").work);
  // High: the trainers lower their micro-batches themselves; nothing is paused.
  poll(low_node, "running", low, "high");
  poll(high_node, "running", high, "high");
  tick(1s);
  CHECK(low->stages[0].state == "running");
  // Sustained: the low job is paused (checkpoint + requeue), the high one runs on.
  poll(low_node, "running", low, "sustained");
  poll(high_node, "running", high, "sustained");
  tick(1s);
  CHECK(low->stages[0].state == "queued");
  CHECK(high->stages[0].state == "running");
  REQUIRE(!events.empty());
  const std::string& paused = events.back();
  CHECK(paused.starts_with(low->id + " pretrain paused: load shedding: trainer " + low_node + " is pressed (memory 96%"));
  CHECK(paused.find("priority low (0) is the lowest of the pressed trainers' work (highest 2)") != std::string::npos);
  auto told = poll(low_node, "running", low, "sustained");
  CHECK(told.stop);
  CHECK_FALSE(poll(low_node, "stopped", low, "high").work);  // closed: still pressed, nothing new
  tick(11s);  // past the cooldown: the high job is the top class, never paused
  CHECK(high->stages[0].state == "running");
  CHECK_FALSE(poll(low_node, "idle", nullptr, "high").work);
  // The pressure passes: the node opens and the low job is placed again.
  poll(low_node, "idle", nullptr, "ok");
  tick(1s);
  CHECK(low->stages[0].state == "running");
  auto back = poll(low_node, "idle", nullptr, "ok");
  REQUIRE(back.work);
  CHECK(back.work->job == low->id);
  CHECK(back.work->attempt == 2);
}

TEST_CASE("sustained pressure pauses nothing when the pressed work is all of one class") {
  fixture f;
  f.add_trainer("trainer@a");
  f.add_trainer("trainer@b");
  f.jobs.tick(f.nodes, f.now);
  std::vector<const job_rec*> js;
  for (const char* req : {"one", "two"}) {
    submit_args a = fixture::args("[job]\nstages = [\"pretrain\"]\n[train]\nsteps = 100\n");
    a.priority_class = "normal";
    auto r = f.jobs.submit(a, fixture::as(req, "normal"), f.nodes, f.now);
    REQUIRE(r.ok());
    js.push_back(r->first);
  }
  for (const auto* j : js) {
    poll_report r;
    r.node = j->stages[0].node;
    r.state = "running";
    r.job = j->id;
    r.stage = "pretrain";
    r.pressure_level = "sustained";
    r.pressure_why = "memory 99%";
    (void)f.jobs.poll(r, f.now);
  }
  for (int i = 0; i < 3; ++i) {
    f.now += 11s;
    f.nodes.heartbeat("trainer@a", f.now);
    f.nodes.heartbeat("trainer@b", f.now);
    f.jobs.tick(f.nodes, f.now);
  }
  for (const auto* j : js) CHECK(j->stages[0].state == "running");
}

TEST_CASE("a trainer's pressure report is taken as one of three levels, and only sustained closes it, until ok") {
  load_shedding s;
  s.heard("t1", "panic", "");  // not a level: ok
  CHECK_FALSE(s.closed("t1"));
  s.heard("t1", "high", "memory 95%");
  CHECK_FALSE(s.closed("t1"));  // high: the trainer sheds by itself
  s.heard("t1", "sustained", std::string(10000, 'x'));
  CHECK(s.closed("t1"));
  s.heard("t1", "high", "memory 93%");
  CHECK(s.closed("t1"));  // not passed yet
  s.heard("t1", "", "");  // an older trainer says nothing: ok
  CHECK_FALSE(s.closed("t1"));
  s.heard("t1", "sustained", "memory 99%");
  s.forget("t1");
  CHECK_FALSE(s.closed("t1"));
}
