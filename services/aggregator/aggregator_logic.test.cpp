// The aggregator's handler table: its status request answered, an unknown
// type and a bad body refused naming the service and the type.
#include "services/aggregator/aggregator_logic.hpp"

#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/aggregator.pb.h"

#include <doctest/doctest.h>

using namespace loom;

TEST_CASE("the aggregator answers its status at round 0 and refuses what it does not handle") {
  aggregator::aggregator_logic logic;
  runtime::call_context ctx;
  auto h = logic.handle("loom.v1.AggregatorStatusRequest", v1::AggregatorStatusRequest{}.SerializeAsString(), ctx);
  REQUIRE(h.code == errc::ok);
  CHECK(h.type == "loom.v1.AggregatorStatusReply");
  auto rep = runtime::parse_as<v1::AggregatorStatusReply>(h.body);
  REQUIRE(rep.ok());
  CHECK(rep->round() == 0);
  CHECK(rep->sites_size() == 0);

  auto unknown = logic.handle("loom.v1.ImportDatasetRequest", "", ctx);
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "aggregator does not handle loom.v1.ImportDatasetRequest");
  auto bad = logic.handle("loom.v1.AggregatorStatusRequest", "\xff\xff\xff", ctx);
  CHECK(bad.code == errc::invalid_argument);
  CHECK(bad.message == "body is not a valid loom.v1.AggregatorStatusRequest");
}
