#include "services/scheduler/scheduler_logic.hpp"

#include "libs/metrics/metrics.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/jobs.pb.h"
#include "loom/v1/scheduler.pb.h"

#include <doctest/doctest.h>

using namespace loom;
using namespace std::chrono_literals;

namespace {
struct fixture {
  scheduler::time_point now{};
  scheduler::scheduler_logic logic{nullptr, [this] { return now; }};

  // An admin's token over this deployment's trainer key (a node's own requests pass).
  runtime::handled call(const google::protobuf::Message& m) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(),
                        {"r", "admin", "admin", "local", "default", "trainer"});
  }
};
}  // namespace

TEST_CASE_FIXTURE(fixture, "a registered node is listed with its resources and state") {
  v1::RegisterNodeRequest reg;
  reg.mutable_node()->set_value("trainer@h1");
  reg.set_service("trainer");
  reg.set_zone("local");
  reg.mutable_resources()->set_cpu_cores(2);
  reg.set_pid(123);
  auto h = call(reg);
  REQUIRE(h.code == errc::ok);
  auto reply = runtime::parse_as<v1::RegisterNodeReply>(h.body);
  REQUIRE(reply.ok());
  CHECK(reply->heartbeat_interval_ms() == 1000);

  auto l = call(v1::ListNodesRequest{});
  auto list = runtime::parse_as<v1::ListNodesReply>(l.body);
  REQUIRE(list.ok());
  REQUIRE(list->nodes_size() == 1);
  CHECK(list->nodes(0).resources().cpu_cores() == 2);
  CHECK(list->nodes(0).state() == "alive");
  now += 5s;
  list = runtime::parse_as<v1::ListNodesReply>(call(v1::ListNodesRequest{}).body);
  CHECK(list->nodes(0).state() == "dead");
}

TEST_CASE_FIXTURE(fixture, "a node reaped after its death counts as lost, from a series that started at zero") {
  metrics::service_metrics m("scheduler");
  logic.set_metrics(&m);
  v1::RegisterNodeRequest reg;
  reg.mutable_node()->set_value("trainer@h1");
  reg.set_service("trainer");
  reg.set_zone("north");
  REQUIRE(call(reg).code == errc::ok);
  now += 3s;
  logic.on_tick();
  CHECK(m.render().find("loom_scheduler_nodes_lost_total{service=\"trainer\",zone=\"north\"} 0") != std::string::npos);
  now += 10s;  // dead, not yet reaped (a minute past death)
  logic.on_tick();
  CHECK(m.render().find("loom_scheduler_nodes_lost_total{service=\"trainer\",zone=\"north\"} 0") != std::string::npos);
  now += 60s;
  logic.on_tick();
  CHECK(m.render().find("loom_scheduler_nodes_lost_total{service=\"trainer\",zone=\"north\"} 1") != std::string::npos);
  auto list = runtime::parse_as<v1::ListNodesReply>(call(v1::ListNodesRequest{}).body);
  CHECK(list->nodes_size() == 0);
}

TEST_CASE_FIXTURE(fixture, "bad requests get precise errors") {
  CHECK(logic.handle("loom.v1.RegisterNodeRequest", "\xff\xff\xff", {}).code == errc::invalid_argument);
  CHECK(call(v1::RegisterNodeRequest{}).code == errc::invalid_argument);
  v1::DrainNodeRequest d;
  d.mutable_node()->set_value("nobody");
  auto h = call(d);
  CHECK(h.code == errc::not_found);
  CHECK(h.message.find("nobody") != std::string::npos);
  CHECK(logic.handle("loom.v1.Whatever", "", {}).code == errc::unimplemented);
}

TEST_CASE_FIXTURE(fixture, "a heartbeat from an unknown node is answered known=false") {
  v1::NodeHeartbeatRequest hb;
  hb.mutable_node()->set_value("ghost");
  auto rep = runtime::parse_as<v1::NodeHeartbeatReply>(call(hb).body);
  REQUIRE(rep.ok());
  CHECK_FALSE(rep->known());
}

TEST_CASE_FIXTURE(fixture, "listing jobs in a state that does not exist is refused naming it") {
  v1::ListJobsRequest l;
  l.set_state("bogus");
  auto h = call(l);
  CHECK(h.code == errc::invalid_argument);
  CHECK(h.message.find("state bogus") != std::string::npos);
  l.set_state("running");
  CHECK(call(l).code == errc::ok);
}

TEST_CASE_FIXTURE(fixture, "a submit through the wire is refused with its reason and the job's waiting reason is on the wire") {
  v1::SubmitJobRequest s;
  s.set_template_name("t");
  s.set_template_toml("[train]\nsteps = 3\n");
  runtime::call_context ctx{"r1", "alice", "operator", "local", "red"};
  auto bad = logic.handle(s.GetDescriptor()->full_name(), s.SerializeAsString(), ctx);
  CHECK(bad.code == errc::invalid_argument);
  CHECK(bad.message.find("exactly one of data.shards") != std::string::npos);
  s.add_overrides("text=/data/corpus.txt");
  auto ok = logic.handle(s.GetDescriptor()->full_name(), s.SerializeAsString(), ctx);
  REQUIRE(ok.code == errc::ok);
  auto rep = runtime::parse_as<v1::SubmitJobReply>(ok.body);
  REQUIRE(rep.ok());
  CHECK(rep->job().tenant() == "red");
  CHECK(rep->job().stages(0).state() == "queued");
  CHECK(rep->job().stages(0).waiting() == "no live trainer in zone local");  // no zone named: the scheduler's
  CHECK(rep->job().stages(0).memory_bytes() > (1ull << 30));  // GPT-2 small's weights and AdamW alone
}

namespace {
// Who calls: a token (principal, role, tenant) over a connection's CURVE key.
runtime::call_context as(const std::string& peer, const std::string& principal = "trainer@h1",
                         const std::string& role = "operator", const std::string& tenant = "default") {
  static int n = 0;  // each call its own request id
  return {"rid-" + std::to_string(++n), principal, role, "local", tenant, peer};
}

struct jobs_fixture {
  scheduler::time_point now = scheduler::time_point{} + 1000s;
  std::vector<std::pair<scheduler::job_event, scheduler::scheduler_logic::event_caller>> events;
  scheduler::scheduler_logic logic{nullptr, [this] { return now; }, "/jobs",
                                   [this](const scheduler::job_rec&, const scheduler::job_event& e,
                                          const scheduler::scheduler_logic::event_caller& by) {
                                     events.emplace_back(e, by);
                                   }};

  runtime::handled call(const google::protobuf::Message& m, const runtime::call_context& ctx) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), ctx);
  }
  // A trainer node registered with its own key (zone: the key's site, else local).
  void trainer(const std::string& id, const std::string& key = "trainer", const std::string& zone = "local") {
    v1::RegisterNodeRequest r;
    r.mutable_node()->set_value(id);
    r.set_service("trainer");
    r.set_zone(zone);
    r.mutable_resources()->set_cpu_cores(8);
    r.mutable_resources()->set_memory_bytes(64ull << 30);
    REQUIRE_MESSAGE(call(r, as(key, id)).code == errc::ok, id);
    logic.on_tick();  // into the scheduling policy
  }
  std::string submit(const std::string& tenant, const std::string& zone = "") {
    v1::SubmitJobRequest s;
    s.set_template_name("t");
    s.set_template_toml("[train]\nsteps = 3\n");
    s.add_overrides("text=/data/corpus.txt");
    s.set_zone(zone);
    auto h = call(s, as("client", "op-" + tenant, "operator", tenant));
    REQUIRE_MESSAGE(h.code == errc::ok, h.message);
    auto rep = runtime::parse_as<v1::SubmitJobReply>(h.body);
    REQUIRE(rep.ok());
    return rep->job().id();
  }
  runtime::handled poll(const std::string& node, const std::string& state, const runtime::call_context& ctx,
                        const std::string& job = "", std::uint64_t step = 0) {
    v1::PollWorkRequest p;
    p.mutable_node()->set_value(node);
    p.set_state(state);
    p.set_job(job);
    p.set_stage(job.empty() ? "" : "pretrain");
    p.set_step(step);
    if (step) p.set_checkpoint("/jobs/" + job + "/pretrain/checkpoints/step-" + std::to_string(step));
    return call(p, ctx);
  }
  const scheduler::job_rec& job(const std::string& id) { return *logic.jobs().find(id); }
};
}  // namespace

TEST_CASE_FIXTURE(jobs_fixture, "the client key speaks for no node whatever its token, and the job it names is untouched") {
  trainer("trainer@h1");
  const std::string id = submit("blue");
  REQUIRE(poll("trainer@h1", "idle", as("trainer")).code == errc::ok);
  REQUIRE(poll("trainer@h1", "running", as("trainer"), id, 1).code == errc::ok);
  const std::size_t before = events.size();
  for (const char* role : {"operator", "admin"}) {
    INFO(role);
    auto tenant_op = as("client", "op-red", role, "red");
    auto failed = poll("trainer@h1", "failed", tenant_op, id);
    CHECK(failed.code == errc::permission_denied);
    CHECK(failed.message.find("client key") != std::string::npos);
    CHECK(poll("trainer@h1", "succeeded", tenant_op, id, 3).code == errc::permission_denied);
    v1::RegisterNodeRequest fake;
    fake.mutable_node()->set_value("fake@h9");
    fake.set_service("trainer");
    fake.set_zone("local");
    CHECK(call(fake, tenant_op).code == errc::permission_denied);
    v1::RegisterNodeRequest over = fake;
    over.mutable_node()->set_value("trainer@h1");
    CHECK(call(over, tenant_op).code == errc::permission_denied);
    v1::NodeHeartbeatRequest hb;
    hb.mutable_node()->set_value("trainer@h1");
    CHECK(call(hb, tenant_op).code == errc::permission_denied);
  }
  CHECK(job(id).state == "running");
  CHECK(job(id).stages[0].step == 1);
  CHECK(logic.nodes().find("fake@h9") == nullptr);
  CHECK(events.size() == before);  // nothing happened to the job
}

TEST_CASE_FIXTURE(jobs_fixture, "a report of a stage the node does not hold, or of an older attempt, is refused and not applied") {
  trainer("trainer@h1");
  trainer("trainer@h2");
  const std::string a = submit("blue"), b = submit("red");
  REQUIRE(poll("trainer@h1", "idle", as("trainer")).code == errc::ok);
  REQUIRE(poll("trainer@h2", "idle", as("trainer")).code == errc::ok);
  const auto& ja = job(a);
  const std::string holder = ja.stages[0].node, other = holder == "trainer@h1" ? "trainer@h2" : "trainer@h1";
  REQUIRE(poll(holder, "running", as("trainer"), a, 1).code == errc::ok);
  auto h = poll(other, "succeeded", as("trainer", other), a, 3);  // the other node claims a's stage
  REQUIRE(h.code == errc::ok);
  auto rep = runtime::parse_as<v1::PollWorkReply>(h.body);
  REQUIRE(rep.ok());
  CHECK(rep->refused().find("its report of " + a + "/pretrain") != std::string::npos);
  CHECK(ja.state == "running");
  CHECK(ja.stages[0].step == 1);
  // The holder's own report of an attempt it no longer runs is refused too.
  v1::PollWorkRequest stale;
  stale.mutable_node()->set_value(holder);
  stale.set_state("failed");
  stale.set_job(a);
  stale.set_stage("pretrain");
  stale.set_attempt(ja.stages[0].attempts + 1);
  auto s = runtime::parse_as<v1::PollWorkReply>(call(stale, as("trainer", holder)).body);
  REQUIRE(s.ok());
  CHECK(!s->refused().empty());
  CHECK(ja.state == "running");
  // Its current attempt ends the stage.
  stale.set_attempt(ja.stages[0].attempts);
  stale.set_state("succeeded");
  stale.set_checkpoint("/jobs/" + a + "/pretrain/checkpoints/step-3");
  auto ok = runtime::parse_as<v1::PollWorkReply>(call(stale, as("trainer", holder)).body);
  REQUIRE(ok.ok());
  CHECK(ok->refused().empty());
  CHECK(ja.state == "succeeded");
}

TEST_CASE_FIXTURE(jobs_fixture, "the job events a poll causes name its caller: token principal and CURVE key") {
  trainer("trainer@north.h", "site:north:trainer", "north");
  const std::string id = submit("blue", "north");
  REQUIRE(poll("trainer@north.h", "idle", as("site:north:trainer", "site:north")).code == errc::ok);
  events.clear();
  REQUIRE(poll("trainer@north.h", "running", as("site:north:trainer", "site:north"), id, 2).code == errc::ok);
  REQUIRE(!events.empty());
  CHECK(events.back().first.kind == "snapshot");
  CHECK(events.back().second.peer == "site:north:trainer");
  CHECK(events.back().second.principal == "site:north");
  CHECK(events.back().second.role == "operator");
  // What the scheduler does on its own (a tick's placement) names no caller.
  const std::string other = submit("blue");  // the scheduler's zone has no trainer yet: queued
  events.clear();
  trainer("trainer@h1");  // placed at the tick
  bool placed = false;
  for (const auto& [e, by] : events)
    if (e.kind == "placed" && by.peer.empty() && by.principal.empty()) placed = true;
  CHECK(placed);
  CHECK(job(other).state == "running");
}

TEST_CASE_FIXTURE(jobs_fixture, "a job that names no zone runs on the scheduler's own trainers, never on a site's") {
  trainer("trainer@h1");
  trainer("trainer@north.h", "site:north:trainer", "north");
  v1::DrainNodeRequest d;
  d.mutable_node()->set_value("trainer@h1");
  REQUIRE(call(d, as("client", "root", "admin")).code == errc::ok);  // in force at once, not at the next tick
  const std::string id = submit("blue");
  CHECK(job(id).zone == "local");
  CHECK(job(id).state == "queued");
  logic.on_tick();
  CHECK(job(id).state == "queued");  // the site's idle trainer is not the cloud's
  v1::GetJobRequest g;
  g.set_id(id);
  auto got = runtime::parse_as<v1::GetJobReply>(call(g, as("client", "root", "admin")).body);
  REQUIRE(got.ok());
  CHECK(got->job().stages(0).waiting().find("zone local") != std::string::npos);
  v1::UndrainNodeRequest u;
  u.mutable_node()->set_value("trainer@h1");
  REQUIRE(call(u, as("client", "root", "admin")).code == errc::ok);
  CHECK(job(id).state == "running");
  CHECK(job(id).stages[0].node == "trainer@h1");
  // A job naming the site's zone runs there; its result stays at the site, and says so.
  const std::string at_site = submit("blue", "north");
  REQUIRE(poll("trainer@north.h", "idle", as("site:north:trainer", "site:north")).code == errc::ok);
  REQUIRE(poll("trainer@north.h", "succeeded", as("site:north:trainer", "site:north"), at_site, 3).code == errc::ok);
  CHECK(job(at_site).state == "succeeded");
  bool said = false, unregistered = false;
  for (const auto& [e, by] : events) {
    said |= e.kind == "stage_succeeded" && e.text.find("at site north") != std::string::npos;
    unregistered |= e.kind == "model_not_registered" && e.text.find("kept at site north") != std::string::npos;
  }
  CHECK(said);
  CHECK(unregistered);
}

TEST_CASE_FIXTURE(jobs_fixture, "draining is the admin's or the node's own site's, and an undrain gives it work again") {
  trainer("trainer@h1");
  trainer("trainer@north.h", "site:north:trainer", "north");
  auto drain = [&](const std::string& node, const runtime::call_context& ctx, bool on = true) {
    if (on) {
      v1::DrainNodeRequest d;
      d.mutable_node()->set_value(node);
      return call(d, ctx);
    }
    v1::UndrainNodeRequest d;
    d.mutable_node()->set_value(node);
    return call(d, ctx);
  };
  auto tenant_op = as("client", "op-red", "operator", "red");
  auto refused = drain("trainer@h1", tenant_op);
  CHECK(refused.code == errc::permission_denied);
  CHECK(refused.message.find("the admin's, or its own site's") != std::string::npos);
  CHECK(drain("trainer@north.h", as("site:north:client", "site:north")).code == errc::ok);
  CHECK(logic.nodes().find("trainer@north.h")->draining);
  CHECK(drain("trainer@h1", as("site:north:client", "site:north")).code == errc::permission_denied);
  CHECK(drain("trainer@north.h", as("client", "site:north")).code == errc::permission_denied);  // not over its key
  CHECK(drain("trainer@north.h", tenant_op, false).code == errc::permission_denied);
  CHECK(drain("trainer@north.h", as("site:north:client", "site:north"), false).code == errc::ok);
  CHECK_FALSE(logic.nodes().find("trainer@north.h")->draining);
  auto by_admin = drain("trainer@h1", as("client", "root", "admin"));
  CHECK(by_admin.code == errc::ok);
  CHECK(by_admin.audit_payload.find("\"drained\":true") != std::string::npos);
  // A restarted trainer registers again: still drained.
  trainer("trainer@h1");
  CHECK(logic.nodes().find("trainer@h1")->draining);
}
