// The aggregator's handler table: StartAggregation starts a job (again for
// the same spec, refused for another), status shows it, an unknown type and
// a bad body are refused naming the service and the type.
#include "services/aggregator/aggregator_logic.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/engine.hpp"

#include <doctest/doctest.h>

using namespace loom;

namespace {

v1::StartAggregationRequest start_request(std::uint64_t seed) {
  v1::StartAggregationRequest r;
  auto* s = r.mutable_spec();
  s->set_job("tiny");
  s->set_flat_size(1000);
  s->set_fragments(2);
  s->set_sync_every(10);
  s->set_codec("int8");
  s->set_init_seed(seed);
  return r;
}

}  // namespace

TEST_CASE("the aggregator starts an aggregation once, shows it in its status, and refuses what it does not handle") {
  files::temp_dir dir;
  auto jobs = std::make_shared<aggregator::engine>(aggregator::engine_options{dir.path(), "aggregator@test", "local", {}, nullptr});
  aggregator::aggregator_logic logic(jobs, {"tcp://127.0.0.1:5555", "key"});
  runtime::call_context ctx;
  auto empty = logic.handle("loom.v1.AggregatorStatusRequest", v1::AggregatorStatusRequest{}.SerializeAsString(), ctx);
  REQUIRE(empty.code == errc::ok);
  CHECK(runtime::parse_as<v1::AggregatorStatusReply>(empty.body)->jobs_size() == 0);

  auto h = logic.handle("loom.v1.StartAggregationRequest", start_request(7).SerializeAsString(), ctx);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto started = runtime::parse_as<v1::StartAggregationReply>(h.body);
  REQUIRE(started.ok());
  CHECK(started->delta_endpoint() == "tcp://127.0.0.1:5555");
  CHECK(started->versions_size() == 2);
  CHECK_FALSE(started->resumed());
  CHECK(h.audit_job_id == "tiny");
  auto again = logic.handle("loom.v1.StartAggregationRequest", start_request(7).SerializeAsString(), ctx);
  REQUIRE(again.code == errc::ok);
  CHECK(runtime::parse_as<v1::StartAggregationReply>(again.body)->resumed());
  auto other = logic.handle("loom.v1.StartAggregationRequest", start_request(8).SerializeAsString(), ctx);
  CHECK(other.code == errc::already_exists);
  v1::StartAggregationRequest bad = start_request(7);
  bad.mutable_spec()->set_codec("zip");
  auto refused = logic.handle("loom.v1.StartAggregationRequest", bad.SerializeAsString(), ctx);
  CHECK(refused.code == errc::invalid_argument);
  CHECK(refused.message.find("codec 'zip'") != std::string::npos);

  auto st = logic.handle("loom.v1.AggregatorStatusRequest", v1::AggregatorStatusRequest{}.SerializeAsString(), ctx);
  auto rep = runtime::parse_as<v1::AggregatorStatusReply>(st.body);
  REQUIRE(rep.ok());
  REQUIRE(rep->jobs_size() == 1);
  CHECK(rep->jobs(0).spec().job() == "tiny");
  CHECK(rep->jobs(0).fragments_size() == 2);
  CHECK(rep->jobs(0).fragments(1).round() == 0);
  CHECK(rep->round() == 0);

  auto unknown = logic.handle("loom.v1.ImportDatasetRequest", "", ctx);
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "aggregator does not handle loom.v1.ImportDatasetRequest");
  auto bad_body = logic.handle("loom.v1.AggregatorStatusRequest", "\xff\xff\xff", ctx);
  CHECK(bad_body.code == errc::invalid_argument);
  CHECK(bad_body.message == "body is not a valid loom.v1.AggregatorStatusRequest");
}
