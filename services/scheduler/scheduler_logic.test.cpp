#include "services/scheduler/scheduler_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
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
