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
