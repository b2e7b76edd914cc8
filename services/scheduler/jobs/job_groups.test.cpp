// The job manager's trainer groups without a store: a gang of two placed with
// ranks and peers, rank 0 speaking for the group, a member's restart or its
// regroup request re-forming the group, a lost member requeueing a gang and
// shrinking an elastic group. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {

constexpr const char* gang_of_two =
    "[job]\nstages = [\"pretrain\", \"sft\"]\n[train]\nsteps = 10\ngrad_accum = 4\n[stage.pretrain]\n"
    "\"parallel.trainers\" = 2\n";
constexpr const char* elastic = "[train]\nsteps = 10\ngrad_accum = 4\n[parallel]\nmin_trainers = 1\nmax_trainers = 3\n";

struct group_fixture : testing::job_fixture {
  const job_rec* submit(const std::string& req, const char* tmpl) { return submit_template(req, tmpl); }
  poll_answer poll(const std::string& node, const std::string& state, const std::string& job = "",
                   const std::string& stage = "", std::uint64_t generation = 0, std::uint64_t step = 0) {
    poll_report r;
    r.node = node;
    r.state = state;
    r.job = job;
    r.stage = stage;
    r.step = step;
    r.generation = generation;
    r.peer_endpoint = "tcp://" + node;
    r.peer_public_key = "key-" + node;
    return jobs.poll(r, now);
  }
  // Two trainers, a gang-of-two job placed on them, both members told (polled idle once).
  const job_rec* gang_on_two() {
    add_trainer("t1");
    add_trainer("t2");
    jobs.tick(nodes, now);
    const job_rec* j = submit("r1", gang_of_two);
    poll(j->stages[0].members[0], "idle");
    poll(j->stages[0].members[1], "idle");
    return j;
  }
};

}  // namespace

TEST_CASE_FIXTURE(group_fixture, "a gang of two waits for two trainers, then each member gets its rank and the peers") {
  add_trainer("t1");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1", gang_of_two);
  CHECK(j->stages[0].state == "queued");  // one trainer is not a gang of two
  CHECK(j->stages[0].min_trainers == 2);
  add_trainer("t2");
  jobs.tick(nodes, now);
  REQUIRE(j->stages[0].state == "running");
  REQUIRE(j->stages[0].members.size() == 2);
  CHECK(j->stages[0].generation == 1);

  // Each member's inbox must be known before anyone is told to start.
  const std::string first = j->stages[0].members[0], second = j->stages[0].members[1];
  nodes.heartbeat(first, now);
  poll_report quiet;  // the second member polls without an endpoint yet
  quiet.node = second;
  quiet.state = "idle";
  CHECK(!jobs.poll(quiet, now).work);
  CHECK(!poll(first, "idle").work);  // the second's inbox is still unknown
  auto a1 = poll(second, "idle");
  REQUIRE(a1.work);
  auto a0 = poll(first, "idle");
  REQUIRE(a0.work);
  CHECK(a0.work->rank == 0);
  CHECK(a1.work->rank == 1);
  CHECK(a0.work->world == 2);
  CHECK(a1.work->generation == 1);
  REQUIRE(a1.work->peers.size() == 2);
  CHECK(a1.work->peers[0].endpoint == "tcp://" + first);
  CHECK(a1.work->peers[1].public_key == "key-" + second);
  CHECK(a0.work->out_dir == a1.work->out_dir);  // one stage directory: rank 0 writes it

  // Rank 0 speaks for the group: rank 1's progress is not the stage's.
  poll(first, "running", j->id, "pretrain", 1, 4);
  poll(second, "running", j->id, "pretrain", 1, 9);
  CHECK(j->stages[0].step == 4);
  // Rank 1 finishing first changes nothing; it is held idle until rank 0 ends the stage.
  CHECK(!poll(second, "succeeded", j->id, "pretrain", 1, 10).work);
  CHECK(!poll(second, "idle").work);
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[0].attempts == 1);
  poll(first, "succeeded", j->id, "pretrain", 1, 10);
  CHECK(j->stages[0].state == "succeeded");
  // The SFT stage is a group of one on either trainer.
  REQUIRE(j->stages[1].state == "running");
  CHECK(j->stages[1].members.size() == 1);
  auto sft = poll(j->stages[1].members[0], "idle");
  REQUIRE(sft.work);
  CHECK(sft.work->world == 1);
  CHECK(sft.work->peers.empty());
}

TEST_CASE_FIXTURE(group_fixture, "a member that restarts or asks to regroup re-forms the group: a new generation for all") {
  const job_rec* j = gang_on_two();
  const std::string m0 = j->stages[0].members[0], m1 = j->stages[0].members[1];
  poll(m0, "running", j->id, "pretrain", 1, 3);
  poll(m1, "running", j->id, "pretrain", 1, 3);

  // kill -9 of member 1: it polls idle while the group still runs generation 1.
  auto back = poll(m1, "idle");
  REQUIRE(back.work);
  CHECK(back.work->generation == 2);
  CHECK(j->stages[0].attempts == 2);
  // Member 0, still running generation 1, is handed generation 2 (it stops and restarts).
  auto told = poll(m0, "running", j->id, "pretrain", 1, 3);
  REQUIRE(told.work);
  CHECK(told.work->generation == 2);
  CHECK(j->stages[0].step == 3);  // a stale formation's progress is not recorded
  // Its stop is not another restart.
  auto again = poll(m0, "stopped", j->id, "pretrain", 1, 3);
  REQUIRE(again.work);
  CHECK(again.work->generation == 2);
  CHECK(j->stages[0].attempts == 2);
  poll(m0, "running", j->id, "pretrain", 2, 4);
  poll(m1, "running", j->id, "pretrain", 2, 4);

  // A member whose collective failed asks to regroup: once per generation.
  auto re = poll(m1, "regroup", j->id, "pretrain", 2, 4);
  REQUIRE(re.work);
  CHECK(re.work->generation == 3);
  CHECK(poll(m0, "regroup", j->id, "pretrain", 2, 4).work->generation == 3);  // the same event seen by both
  CHECK(j->stages[0].generation == 3);
  CHECK(j->stages[0].regroups == 1);
}

TEST_CASE_FIXTURE(group_fixture, "a group that keeps asking to regroup fails its stage, naming the member") {
  add_trainer("t1");
  add_trainer("t2");
  jobs.tick(nodes, now);
  const job_rec* j = submit("r1", gang_of_two);
  const std::string m1 = j->stages[0].members[1];
  for (std::uint32_t k = 0; k <= job_manager::max_regroups; ++k) {
    poll(j->stages[0].members[0], "idle");
    poll(m1, "regroup", j->id, "pretrain", j->stages[0].generation, 0);
  }
  CHECK(j->state == "failed");
  CHECK(j->message.find("re-formed 20 times") != std::string::npos);
  CHECK(j->message.find(m1 + " (rank 1 of 2)") != std::string::npos);
}

TEST_CASE_FIXTURE(group_fixture, "a lost member requeues a gang whole, and an elastic group shrinks to the rest") {
  add_trainer("t1");
  add_trainer("t2");
  add_trainer("t3");
  jobs.tick(nodes, now);
  const job_rec* flex = submit("r1", elastic);
  REQUIRE(flex->stages[0].members.size() == 3);  // grows to max on idle trainers
  const std::uint64_t gen = flex->stages[0].generation;
  const std::string lost = flex->stages[0].members[1];
  now += 5s;
  for (const auto& m : flex->stages[0].members)
    if (m != lost) nodes.heartbeat(m, now);
  jobs.tick(nodes, now);
  REQUIRE(flex->stages[0].state == "running");
  CHECK(flex->stages[0].members.size() == 2);
  CHECK(flex->stages[0].generation == gen + 1);
  poll(flex->stages[0].members[0], "idle");
  auto a = poll(flex->stages[0].members[1], "idle");
  REQUIRE(a.work);
  CHECK(a.work->rank == 1);
  CHECK(a.work->world == 2);
  CHECK(!poll(lost, "running", flex->id, "pretrain", gen, 5).work);  // no longer a member: told to stop
}

TEST_CASE_FIXTURE(group_fixture, "a gang loses a member: the whole stage goes back to the queue until two trainers are free") {
  const job_rec* j = gang_on_two();
  const std::string m0 = j->stages[0].members[0], m1 = j->stages[0].members[1];
  now += 5s;
  nodes.heartbeat(m0, now);
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "queued");
  CHECK(j->stages[0].members.empty());
  CHECK(poll(m0, "running", j->id, "pretrain", 1, 2).stop);  // the survivor stops (with a snapshot)
  add_trainer("t3");
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "running");
  CHECK(j->stages[0].generation == 2);
  CHECK(j->stages[0].attempts == 2);
}

TEST_CASE_FIXTURE(group_fixture, "each member's site line (a diloco stage) is kept by site name, in order, for job watch") {
  const job_rec* j = gang_on_two();
  const std::uint64_t gen = j->stages[0].generation;
  auto site_poll = [&](int member, const std::string& site, std::uint64_t step, std::uint64_t sent) {
    poll_report r;
    r.node = j->stages[0].members[member];
    r.state = "running";
    r.job = j->id;
    r.stage = "pretrain";
    r.generation = gen;
    r.step = step;
    r.site = {site, r.node, step, 5.0, sent, 2 * sent, 0.01, 3, 4, 1, 0, 0, 0, {}};
    jobs.poll(r, now);
  };
  site_poll(1, "site-1", 7, 100);
  site_poll(0, "site-0", 8, 200);
  site_poll(1, "site-1", 9, 300);  // replaces its line
  REQUIRE(j->stages[0].sites.size() == 2);
  CHECK(j->stages[0].sites[0].site == "site-0");
  CHECK(j->stages[0].sites[0].bytes_sent == 200);
  CHECK(j->stages[0].sites[1].step == 9);
  CHECK(j->stages[0].sites[1].bytes_sent == 300);
  CHECK(j->stages[0].sites[1].node == j->stages[0].members[1]);
  CHECK(j->stages[0].sites[1].round == 3);
  // Each site's loss curve, for loom report: the scheduler's own, whatever a poll carries.
  using curve = std::vector<std::pair<std::uint64_t, double>>;
  CHECK(j->stages[0].sites[1].curve == curve{{7, 5.0}, {9, 5.0}});
  CHECK(j->stages[0].sites[0].curve == curve{{8, 5.0}});
  site_poll(0, "site-0", 8, 200);  // the same step again: no new point
  CHECK(j->stages[0].sites[0].curve == curve{{8, 5.0}});
}
