#include "services/scheduler/scheduler_logic.hpp"

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

  runtime::handled call(const google::protobuf::Message& m) {
    return logic.handle(m.GetDescriptor()->full_name(), m.SerializeAsString(), {});
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
  CHECK(rep->job().stages(0).waiting() == "no live trainer in any zone");
  CHECK(rep->job().stages(0).memory_bytes() > (1ull << 30));  // GPT-2 small's weights and AdamW alone
}
