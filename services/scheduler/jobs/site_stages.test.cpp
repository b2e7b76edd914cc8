// Edge-site stages in the job manager (site_stages.cpp), without a store:
// member r on a trainer of site r, a lost member re-placed inside its site,
// other jobs kept off the trainers it holds. Time is injected.
#include "services/scheduler/jobs/job_manager.hpp"
#include "services/scheduler/jobs/job_manager_testing.hpp"

#include <doctest/doctest.h>

using namespace loom;
using namespace loom::scheduler;
using namespace std::chrono_literals;

namespace {

constexpr const char* sited =
    "kind = \"diloco\"\n[job]\nstages = [\"pretrain\"]\n[train]\nsteps = 10\n"
    "[diloco]\nsites = [\"north\", \"south\"]\ninner_steps = 4\n";
constexpr const char* plain = "[job]\nstages = [\"pretrain\"]\n[train]\nsteps = 10\n";

struct fixture : testing::job_fixture {
  void add(const std::string& id, const std::string& zone) {
    add_trainer(id);
    node n = *nodes.find(id);
    n.zone = zone;
    nodes.register_node(n, now);
  }
  poll_answer poll(const std::string& node, const std::string& state) {
    poll_report r;
    r.node = node;
    r.state = state;
    r.peer_endpoint = "tcp://127.0.0.1:1";  // a group's assignment waits for every member's inbox
    r.peer_public_key = "k";
    return jobs.poll(r, now);
  }
};

}  // namespace

TEST_CASE_FIXTURE(fixture, "an edge-site stage puts member r on site r's trainer and re-places a lost one inside its site") {
  add("trainer@north.a", "north");
  add("trainer@north.b", "north");
  add("trainer@south.a", "south");
  add("trainer@cloud", "local");
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", sited);
  REQUIRE(j->stages[0].state == "running");
  CHECK(j->stages[0].members == std::vector<std::string>{"trainer@north.a", "trainer@south.a"});
  poll("trainer@north.a", "idle");
  auto s = poll("trainer@south.a", "idle");
  auto n = poll("trainer@north.a", "idle");
  REQUIRE(n.work);
  REQUIRE(s.work);
  CHECK(n.work->rank == 0);
  CHECK(s.work->rank == 1);
  CHECK(n.work->world == 2);
  CHECK(!poll("trainer@cloud", "idle").work);     // not a site of the stage
  CHECK(!poll("trainer@north.b", "idle").work);   // the site's spare

  // A plain job never goes to a trainer the stage holds (they are cordoned in the policy).
  const job_rec* other = submit_template("r2", plain);
  REQUIRE(other->stages[0].members.size() == 1);
  CHECK(other->stages[0].members[0] != "trainer@north.a");
  CHECK(other->stages[0].members[0] != "trainer@south.a");

  if (other->stages[0].members[0] == "trainer@north.b") {  // the policy may use a site's spare: free it again
    REQUIRE(jobs.cancel(other->id, "", as("c1"), now).ok());
    jobs.tick(nodes, now);
  }
  // north.a stops answering: north's member moves to north.b, south keeps its place.
  const auto generation = j->stages[0].generation;
  now += 10s;
  for (const char* id : {"trainer@north.b", "trainer@south.a", "trainer@cloud"}) nodes.heartbeat(id, now);
  jobs.tick(nodes, now);
  CHECK(j->stages[0].members == std::vector<std::string>{"trainer@north.b", "trainer@south.a"});
  CHECK(j->stages[0].generation == generation);  // south trains on undisturbed
  auto moved = poll("trainer@north.b", "idle");
  REQUIRE(moved.work);
  CHECK(moved.work->rank == 0);
}

TEST_CASE_FIXTURE(fixture, "an edge-site stage waits, saying which site has no free trainer") {
  add("trainer@north.a", "north");
  add("trainer@cloud", "local");
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", sited);
  CHECK(j->stages[0].state == "queued");
  CHECK(jobs.waiting(*j, 0, nodes, now) == "no free live trainer at site(s) south");
  add("trainer@south.a", "south");
  jobs.tick(nodes, now);
  CHECK(j->stages[0].state == "running");
}

TEST_CASE_FIXTURE(fixture, "a restarted scheduler takes back a site member that is still running, without stopping it") {
  add("trainer@north.a", "north");
  add("trainer@south.a", "south");
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", sited);
  REQUIRE(j->stages[0].state == "running");
  // North's trainer went unseen (a cut, the scheduler's restart): its slot is gone.
  now += 10s;
  nodes.heartbeat("trainer@south.a", now);
  jobs.tick(nodes, now);
  poll_report r;
  r.node = "trainer@north.a";
  r.state = "running";
  r.job = j->id;
  r.stage = "pretrain";
  r.generation = j->stages[0].generation;
  nodes.heartbeat("trainer@north.a", now);
  auto a = jobs.poll(r, now);
  CHECK_FALSE(a.stop);  // trains on
  CHECK(j->stages[0].members == std::vector<std::string>{"trainer@north.a", "trainer@south.a"});
}

TEST_CASE_FIXTURE(fixture, "a diloco stage may name only enrolled sites: refused at submit naming the site and the enrolled ones") {
  add("trainer@north.a", "north");
  jobs.tick(nodes, now);
  jobs.set_site_states([]() -> result<std::map<std::string, std::string>> {
    return std::map<std::string, std::string>{{"north", "enrolled"}, {"east", "enrolled"}, {"west", "revoked"},
                                              {"plant", "pending"}};
  });
  auto with_sites = [&](const std::string& names) {
    return jobs.submit(args(sited, {"diloco.sites=" + names}), as("r-" + names, names), nodes, now);
  };
  auto unknown = with_sites("[\"north\", \"south\"]");
  REQUIRE(!unknown.ok());
  CHECK(unknown.code() == errc::invalid_argument);
  CHECK(unknown.err().message ==
        "stage pretrain: diloco.sites names south, which is not a site of this cloud; enrolled sites: east, north");
  auto revoked = with_sites("[\"west\", \"north\"]");
  REQUIRE(!revoked.ok());
  CHECK(revoked.err().message.find("names west, which was revoked") != std::string::npos);
  auto pending = with_sites("[\"north\", \"plant\"]");
  REQUIRE(!pending.ok());
  CHECK(pending.err().message.find("names plant, which is not enrolled yet (pending)") != std::string::npos);
  CHECK(jobs.list("", as("")).empty());  // nothing stored
  CHECK(with_sites("[\"north\", \"east\"]").ok());
}

TEST_CASE_FIXTURE(fixture, "a running edge-site job whose site is revoked fails naming it, and its trainers are told to stop") {
  add("trainer@north.a", "north");
  add("trainer@south.a", "south");
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", sited);
  REQUIRE(j->stages[0].state == "running");
  for (const char* t : {"trainer@north.a", "trainer@south.a"}) poll(t, "idle");  // each says where its inbox is
  for (const char* t : {"trainer@north.a", "trainer@south.a"}) REQUIRE(poll(t, "idle").work);
  jobs.site_revoked("south", "box stolen", now);
  CHECK(j->state == "failed");
  CHECK(j->stages[0].state == "failed");
  CHECK(j->message == "stage pretrain: site south was revoked (box stolen): the stage cannot run without it");
  // North's trainer is released: its next poll is told to stop, then it gets nothing.
  poll_report r;
  r.node = "trainer@north.a";
  r.state = "running";
  r.job = j->id;
  r.stage = "pretrain";
  r.generation = j->stages[0].generation;
  CHECK(jobs.poll(r, now).stop);
  CHECK(!poll("trainer@north.a", "idle").work);
  // A job submitted later naming the revoked site (before the registry says so) fails at its first tick.
  const job_rec* later = submit_template("r2", sited);
  jobs.tick(nodes, now);
  CHECK(later->state == "failed");
  CHECK(later->message.find("site south was revoked") != std::string::npos);
  // And north's trainer takes other work again (a job of north's zone).
  auto a = args(plain);
  a.zone = "north";
  auto plain_job = jobs.submit(a, as("r3", plain), nodes, now);
  REQUIRE(plain_job.ok());
  jobs.tick(nodes, now);
  CHECK(plain_job->first->state == "running");
  CHECK(plain_job->first->stages[0].node == "trainer@north.a");
}

TEST_CASE_FIXTURE(fixture, "at a site stage's end every member is released: a member still running it is told to stop") {
  add("trainer@north.a", "north");
  add("trainer@south.a", "south");
  jobs.tick(nodes, now);
  const job_rec* j = submit_template("r1", sited);
  for (const char* t : {"trainer@north.a", "trainer@south.a"}) poll(t, "idle");  // each says where its inbox is
  for (const char* t : {"trainer@north.a", "trainer@south.a"}) REQUIRE(poll(t, "idle").work);
  poll_report done;
  done.node = "trainer@north.a";
  done.state = "succeeded";
  done.job = j->id;
  done.stage = "pretrain";
  done.generation = j->stages[0].generation;
  done.step = 10;
  done.checkpoint = "/jobs/" + j->id + "/pretrain/checkpoints/step-000010";
  auto a = jobs.poll(done, now);
  CHECK(a.refused.empty());
  REQUIRE(j->state == "succeeded");
  poll_report stuck = done;  // south never finished its part (it never joined, say)
  stuck.node = "trainer@south.a";
  stuck.state = "running";
  CHECK(jobs.poll(stuck, now).stop);
  CHECK(!poll("trainer@south.a", "idle").work);
}
