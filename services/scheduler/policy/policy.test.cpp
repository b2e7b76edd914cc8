// Unit tests: one scenario per rule of policy.hpp.
#include "services/scheduler/policy/policy.hpp"

#include <doctest/doctest.h>

#include <sstream>

using namespace loom::scheduler::policy;

namespace {

resources gpus(std::uint32_t g) { return {g, g * 4, std::uint64_t(g) << 30}; }

node_spec node(node_id id, const std::string& zone = "a", std::uint32_t g = 8) { return {id, zone, gpus(g)}; }

job_spec job(job_id id, std::uint32_t members, std::uint32_t g, time_ms est = 1000, int prio = 0,
             const std::string& tenant = "t") {
  job_spec j;
  j.id = id;
  j.tenant = tenant;
  j.priority = prio;
  j.per_member = gpus(g);
  j.min_members = j.max_members = members;
  j.estimated_runtime = est;
  return j;
}

policy::decisions must(loom::result<policy::decisions> r) {
  REQUIRE(r.ok());
  return std::move(r).value();
}

bool running(const policy& p, job_id id) { return p.find(id) && p.find(id)->state == job_state::running; }

policy with_nodes(int n, policy_config cfg = {}, const std::string& zone = "a") {
  policy p(cfg);
  for (int i = 0; i < n; ++i) must(p.add_node(node(node_id(i), zone), 0));
  return p;
}

}  // namespace

TEST_CASE("a gang is placed all-or-nothing: it waits while one member does not fit") {
  policy p = with_nodes(2);
  auto d = must(p.submit(job(1, 3, 8), 0));
  CHECK(d.empty());
  CHECK_FALSE(running(p, 1));
  d = must(p.submit(job(2, 2, 8), 0));
  REQUIRE(d.size() == 1);  // backfilled: the 3-node gang can never fit, it delays nothing
  CHECK(d[0].what == action::place);
  CHECK(d[0].nodes.size() == 2);
  CHECK(p.check_invariants().ok());
}

TEST_CASE("a gang never spans zones and honours its zone constraint") {
  policy p;
  must(p.add_node(node(1, "east"), 0));
  must(p.add_node(node(2, "west"), 0));
  CHECK(must(p.submit(job(1, 2, 8), 0)).empty());
  auto j = job(2, 1, 4);
  j.zones = {"west"};
  auto d = must(p.submit(j, 0));
  REQUIRE(d.size() == 1);
  CHECK(d[0].nodes == std::vector<node_id>{2});
}

TEST_CASE("best fit packs a small job onto the fullest node that holds it") {
  policy p = with_nodes(3);
  must(p.submit(job(1, 1, 6), 0));  // fills most of one node
  auto d = must(p.submit(job(2, 1, 2), 0));
  REQUIRE(d.size() == 1);
  CHECK(d[0].nodes == p.find(1)->members);
}

TEST_CASE("a higher priority class is placed before an older lower one") {
  policy p = with_nodes(1);
  auto first = job(1, 1, 8);
  first.min_runtime = 1'000'000;  // not evictable here
  must(p.submit(first, 0));
  must(p.submit(job(2, 1, 8, 1000, 0), 1));
  must(p.submit(job(3, 1, 8, 1000, 5), 2));
  auto d = must(p.finish(1, 10));
  REQUIRE(!d.empty());
  CHECK(d[0].job == 3);
}

TEST_CASE("fair share: the tenant with the lower weighted dominant share goes first") {
  policy_config cfg;
  cfg.preemption = false;
  policy p = with_nodes(2, cfg);
  must(p.submit(job(1, 1, 8, 1000, 0, "heavy"), 0));
  must(p.submit(job(2, 1, 4, 1000, 0, "light"), 0));
  must(p.submit(job(3, 1, 4, 1000, 0, "heavy"), 0));
  CHECK(p.share("heavy") == doctest::Approx(12.0 / 16));
  CHECK(p.share("light") == doctest::Approx(4.0 / 16));
  must(p.submit(job(9, 2, 8, 100'000, 1, "big"), 1));  // the blocked head; the rest are backfill
  must(p.submit(job(4, 1, 4, 100, 0, "heavy"), 1));    // older
  must(p.submit(job(5, 1, 4, 100, 0, "light"), 2));
  auto d = must(p.finish(3, 10));
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 5);
  // Weight 4 makes heavy's share 8/16/4 = 0.125 < light's 8/16: heavy goes first now.
  p.set_tenant_weight("heavy", 4);
  must(p.submit(job(6, 1, 4, 100, 0, "light"), 11));
  d = must(p.finish(2, 20));
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 4);
}

TEST_CASE("EASY backfill: a short job passes the blocked head, a long one that would delay it does not") {
  policy p = with_nodes(2);
  must(p.submit(job(1, 1, 8, 100), 0));   // node A until 100
  must(p.submit(job(2, 1, 4, 50), 0));    // node B half until 50
  must(p.submit(job(3, 2, 8, 100), 0));   // head: both nodes, earliest at 100
  auto r = p.reservation();
  REQUIRE(r);
  CHECK(r->first == 3);
  CHECK(r->second == 100);
  CHECK(must(p.submit(job(4, 1, 4, 500), 1)).empty());  // would hold B past 100
  auto d = must(p.submit(job(5, 1, 4, 90), 1));          // ends at 91 <= 100
  REQUIRE(d.size() == 1);
  CHECK(d[0].why == reason::backfill);
  must(p.finish(2, 50));
  CHECK(must(p.finish(5, 91)).empty());
  d = must(p.finish(1, 100));
  REQUIRE(!d.empty());
  CHECK(d[0].job == 3);
  CHECK(p.check_invariants().ok());
}

TEST_CASE("a long backfill job may use capacity the reservation does not need") {
  policy p = with_nodes(2);
  must(p.submit(job(1, 1, 8, 100), 0));
  must(p.submit(job(2, 1, 4, 300), 0));
  must(p.submit(job(3, 1, 8, 100), 0));  // head: node A at 100
  REQUIRE(p.reservation());
  CHECK(p.reservation()->second == 100);
  auto d = must(p.submit(job(4, 1, 4, 10'000), 1));  // node B's other half: not needed by the head
  REQUIRE(d.size() == 1);
  CHECK(d[0].nodes == p.find(2)->members);
}

TEST_CASE("without a reservation (greedy backfill) the same long job is let through") {
  policy_config cfg;
  cfg.reserve = false;
  policy p = with_nodes(2, cfg);
  must(p.submit(job(1, 1, 8, 100), 0));
  must(p.submit(job(2, 1, 4, 50), 0));
  must(p.submit(job(3, 2, 8, 100), 0));
  CHECK(must(p.submit(job(4, 1, 4, 500), 1)).size() == 1);
}

TEST_CASE("strict FIFO lets nothing pass a blocked head") {
  policy_config cfg;
  cfg.backfill = false;
  policy p = with_nodes(1, cfg);
  must(p.submit(job(1, 1, 4), 0));
  must(p.submit(job(2, 1, 8), 0));
  CHECK(must(p.submit(job(3, 1, 2), 0)).empty());
}

TEST_CASE("a higher-priority job evicts the cheapest whole lower-priority job, checkpoint first") {
  policy p = with_nodes(2);
  auto a = job(1, 1, 8);
  a.checkpointable = true;  // loses only the restart
  must(p.submit(a, 0));
  must(p.submit(job(2, 1, 8), 0));  // would lose 1000 s of work
  auto d = must(p.submit(job(3, 1, 8, 1000, 5), 3'600'000));  // an hour in: B has most to lose
  REQUIRE(d.size() == 2);
  CHECK(d[0].what == action::preempt);
  CHECK(d[0].job == 1);
  CHECK(d[0].checkpoint_first);
  CHECK(d[0].for_job == 3);
  CHECK(d[1].what == action::place);
  CHECK(d[1].job == 3);
  CHECK(p.find(1)->state == job_state::queued);
  CHECK(p.find(1)->members.empty());
  CHECK(running(p, 2));
}

TEST_CASE("nobody is evicted when that would not let the preemptor start") {
  policy p = with_nodes(2);
  must(p.submit(job(1, 1, 8), 0));
  must(p.submit(job(2, 1, 8), 0));
  CHECK(must(p.submit(job(3, 3, 8, 1000, 5), 1000)).empty());
  CHECK(running(p, 1));
  CHECK(running(p, 2));
}

TEST_CASE("a job younger than its min runtime is never evicted") {
  policy p = with_nodes(1);
  auto a = job(1, 1, 8);
  a.min_runtime = 600;
  must(p.submit(a, 0));
  CHECK(must(p.submit(job(2, 1, 8, 1000, 5), 100)).empty());
  CHECK(p.tick(599).empty());
  auto d = p.tick(600);
  REQUIRE(d.size() == 2);
  CHECK(d[0].what == action::preempt);
}

TEST_CASE("two jobs of equal priority never preempt each other") {
  policy p = with_nodes(1);
  must(p.submit(job(1, 1, 8, 1000, 3), 0));
  CHECK(must(p.submit(job(2, 1, 8, 1000, 3), 5000)).empty());
  CHECK(p.tick(100000).empty());
}

TEST_CASE("elastic jobs shrink toward their minimum before anyone is evicted") {
  policy p = with_nodes(3);
  auto e = job(1, 1, 8);
  e.max_members = 2;
  auto d = must(p.submit(e, 0));
  CHECK(d[0].size == 2);
  must(p.submit(job(2, 1, 8), 0));  // rigid, lower priority than the newcomer
  d = must(p.submit(job(3, 1, 8, 1000, 5), 1000));
  REQUIRE(d.size() == 2);
  CHECK(d[0].what == action::shrink);
  CHECK(d[0].job == 1);
  CHECK(d[0].size == 1);
  CHECK(d[1].what == action::place);
  CHECK(running(p, 2));
}

TEST_CASE("an elastic job grows into idle capacity and gives it back to an equal-priority job") {
  policy p = with_nodes(2);
  auto e = job(1, 1, 8);
  e.max_members = 4;
  auto d = must(p.submit(e, 0));
  REQUIRE(d.size() == 1);
  CHECK(d[0].size == 2);
  must(p.add_node(node(7), 1));
  CHECK(p.find(1)->members.size() == 3);
  d = must(p.submit(job(2, 1, 8), 2));
  REQUIRE(d.size() == 2);
  CHECK(d[0].what == action::shrink);
  CHECK(d[0].why == reason::reclaim);
  CHECK(d[0].size == 2);
  CHECK(running(p, 2));
  d = must(p.finish(2, 3));
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == action::grow);
}

TEST_CASE("a lost node requeues its gang and shrinks an elastic job that keeps its minimum") {
  policy p = with_nodes(4);
  must(p.submit(job(1, 2, 8), 0));
  auto e = job(2, 1, 8);
  e.max_members = 2;
  must(p.submit(e, 5));
  CHECK(p.find(2)->members.size() == 2);
  auto d = must(p.remove_node(p.find(1)->members[0], 10));
  // The gang is requeued; one node is left for it, so it takes back the elastic job's borrowed one.
  REQUIRE(d.size() == 3);
  CHECK(d[0].what == action::requeue);
  CHECK(d[0].why == reason::node_lost);
  CHECK(d[1].what == action::shrink);
  CHECK(d[1].job == 2);
  CHECK(d[2].what == action::place);
  CHECK(d[2].job == 1);
  CHECK(p.find(1)->submitted == 0);  // keeps its original queue position
  d = must(p.remove_node(p.find(2)->members[0], 20));
  REQUIRE(!d.empty());
  CHECK(d[0].what == action::requeue);  // elastic job below its minimum: requeued whole
  CHECK(p.check_invariants().ok());
}

TEST_CASE("an elastic job that loses a node but keeps its minimum only shrinks") {
  policy p = with_nodes(3);
  auto e = job(1, 1, 8);
  e.max_members = 3;
  must(p.submit(e, 0));
  auto d = must(p.remove_node(p.find(1)->members[2], 1));
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == action::shrink);
  CHECK(d[0].size == 2);
  CHECK(d[0].why == reason::node_lost);
}

TEST_CASE("bad input is answered with an error and changes nothing") {
  policy p = with_nodes(1);
  auto bad = job(1, 2, 8);
  bad.max_members = 1;
  CHECK(p.submit(bad, 0).code() == loom::errc::invalid_argument);
  CHECK(p.submit(job(2, 1, 0), 0).code() == loom::errc::invalid_argument);
  must(p.submit(job(3, 1, 1), 0));
  CHECK(p.submit(job(3, 1, 1), 0).code() == loom::errc::already_exists);
  CHECK(p.finish(99, 0).code() == loom::errc::not_found);
  CHECK(p.cancel(99, 0).code() == loom::errc::not_found);
  CHECK(p.remove_node(99, 0).code() == loom::errc::not_found);
  CHECK(p.add_node(node(0), 0).code() == loom::errc::already_exists);
  CHECK(p.queued() + p.running() == 1);
}

TEST_CASE("cancelling the reserved head releases its reservation") {
  policy p = with_nodes(1);
  must(p.submit(job(1, 1, 8, 100), 0));
  must(p.submit(job(2, 1, 8, 100), 0));
  REQUIRE(p.reservation());
  must(p.cancel(2, 1));
  CHECK_FALSE(p.reservation());
}

TEST_CASE("restore_running puts a job back on its nodes with no place decision, then schedules the rest") {
  policy p = with_nodes(2);
  auto d = must(p.restore_running(job(7, 1, 8), {1}, -500, 0));
  CHECK(d.empty());
  REQUIRE(running(p, 7));
  CHECK(p.find(7)->members == std::vector<node_id>{1});
  CHECK(p.find(7)->started == -500);
  d = must(p.submit(job(8, 1, 8), 0));
  REQUIRE(d.size() == 1);
  CHECK(d[0].nodes == std::vector<node_id>{0});  // node 1 is taken by the restored job
  CHECK(!p.restore_running(job(9, 1, 8), {1}, 0, 0).ok());   // no room left there
  CHECK(!p.restore_running(job(10, 1, 8), {5}, 0, 0).ok());  // unknown node
  CHECK(!p.restore_running(job(7, 1, 8), {0}, 0, 0).ok());   // already known
  CHECK(p.check_invariants().ok());
  must(p.finish(7, 10));
  CHECK(p.check_invariants().ok());
}

TEST_CASE("a stage switch hands its room to the next stage before lower classes, and checks first") {
  // Stage 1 of a priority-1 pipeline runs; a priority-0 job waits for the node.
  policy p = with_nodes(1);
  REQUIRE(must(p.submit(job(1, 1, 8, 1000, 1), 0)).size() == 1);
  CHECK(must(p.submit(job(2, 1, 8, 1000, 0), 10)).empty());
  // Stage 1 ends; its successor (id 3) is placed at once, nothing is preempted.
  auto d = must(p.finish_and_submit(1, job(3, 1, 8, 1000, 1), 20));
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == action::place);
  CHECK(d[0].job == 3);
  CHECK(running(p, 3));
  CHECK_FALSE(running(p, 2));
  // Finish then submit would start the waiting job and evict it a moment later.
  policy q = with_nodes(1);
  must(q.submit(job(1, 1, 8, 1000, 1), 0));
  must(q.submit(job(2, 1, 8, 1000, 0), 10));
  CHECK(must(q.finish(1, 20)).size() == 1);
  auto churn = must(q.submit(job(3, 1, 8, 1000, 1), 20));
  REQUIRE(!churn.empty());
  CHECK(churn[0].what == action::preempt);
  CHECK(churn[0].job == 2);
  // Refused before anything changes: a successor id in use, or an id not running.
  auto dup = p.finish_and_submit(3, job(2, 1, 8), 30);
  CHECK(dup.code() == loom::errc::already_exists);
  CHECK(running(p, 3));
  CHECK(p.finish_and_submit(99, job(4, 1, 8), 30).code() == loom::errc::not_found);
  CHECK(p.check_invariants().ok());
}

TEST_CASE("in its own class the successor takes its job's place behind a reservation holder, before later arrivals") {
  policy p = with_nodes(1);
  must(p.submit(job(1, 1, 8), 0));
  CHECK(must(p.submit(job(2, 1, 8), 10)).empty());  // the blocked head: holds the reservation
  CHECK(must(p.submit(job(4, 1, 8), 15)).empty());  // arrived after stage 1, before stage 2
  auto d = must(p.finish_and_submit(1, job(3, 1, 8), 20));
  REQUIRE(d.size() == 1);
  CHECK(d[0].job == 2);  // the reservation is kept (rule 4)
  must(p.finish(2, 30));
  CHECK(running(p, 3));  // then stage 2, at stage 1's arrival order, before job 4
  CHECK_FALSE(running(p, 4));
  CHECK(p.check_invariants().ok());
}

TEST_CASE("pause stops a running job for load shedding and requeues it where it was, placed again once its node opens") {
  policy p = with_nodes(2);
  auto a = job(1, 1, 8, 1000, 0);
  a.checkpointable = true;
  must(p.submit(a, 0));
  must(p.submit(job(2, 1, 8, 1000, 5), 0));
  must(p.submit(job(3, 1, 8, 1000, 0), 0));  // queued behind: no room
  REQUIRE(running(p, 1));
  const node_id on = p.find(1)->members.at(0);
  must(p.set_draining(on, true, 10));  // the pressed node takes nothing new
  auto d = must(p.pause(1, 20));
  REQUIRE(d.size() == 1);  // nobody else fits anywhere: node `on` is draining
  CHECK(d[0].what == action::preempt);
  CHECK(d[0].why == reason::pressure);
  CHECK(d[0].checkpoint_first);
  CHECK(d[0].for_job == 0);
  CHECK(p.find(1)->state == job_state::queued);
  CHECK(running(p, 2));
  CHECK_FALSE(p.pause(1, 30).ok());  // queued: nothing to pause
  CHECK(p.pause(99, 30).code() == loom::errc::not_found);
  CHECK(p.check_invariants().ok());
  // The pressure passes: job 1 goes first again (it kept its arrival order ahead of 3).
  d = must(p.set_draining(on, false, 40));
  REQUIRE(d.size() == 1);
  CHECK(d[0].what == action::place);
  CHECK(d[0].job == 1);
  CHECK(p.check_invariants().ok());
}
