// The aggregator's handler table: StartAggregation starts a granted job for a
// placed site's trainer key only (again for the same spec), the status shows
// the caller's tenant's jobs (an admin's: all), an unknown type and a bad body
// are refused naming the service and the type.
#include "services/aggregator/aggregator_logic.hpp"

#include "libs/auth/token.hpp"
#include "libs/diloco/grant/grant.hpp"
#include "libs/diloco/grant/stage_spec.hpp"
#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"
#include "libs/runtime/logic_pb.hpp"
#include "loom/v1/aggregator.pb.h"
#include "services/aggregator/engine.hpp"

#include <doctest/doctest.h>

using namespace loom;

namespace {

const std::string key(32, 'k');

v1::StartAggregationRequest start_request(const std::string& tenant, std::uint64_t seed) {
  v1::StartAggregationRequest r;
  auto* g = r.mutable_grant();
  g->set_job("job-7");
  g->set_stage("pretrain");
  g->set_tenant(tenant);
  g->set_stage_dir("/data/jobs/job-7/pretrain");
  g->add_sites("north");
  g->set_edge_sites(true);
  auto* s = g->mutable_spec();
  s->set_job(diloco::aggregation_name("job-7", "pretrain"));
  s->set_flat_size(1000);
  s->set_fragments(2);
  s->set_sync_every(10);
  s->set_codec("int8");
  s->set_init_seed(seed);
  s->set_max_delta_tokens(1000);
  g->set_expires_unix(INT64_MAX);
  diloco::sign_grant(g, key);
  *r.mutable_spec() = *s;
  return r;
}

}  // namespace

TEST_CASE("the aggregator starts a granted aggregation for a placed site's trainer once, shows it to its tenant, and refuses what it does not handle") {
  files::temp_dir dir;
  aggregator::engine_options o{dir.path(), "aggregator@test", "local", {}, nullptr};
  o.token_key = key;
  auto jobs = std::make_shared<aggregator::engine>(std::move(o));
  aggregator::aggregator_logic logic(jobs, {"tcp://127.0.0.1:5555", "key"}, dir.path());
  runtime::call_context site;
  site.peer = "site:north:trainer";
  site.role = "operator";
  site.tenant = "acme";
  auto empty = logic.handle("loom.v1.AggregatorStatusRequest", v1::AggregatorStatusRequest{}.SerializeAsString(), site);
  REQUIRE(empty.code == errc::ok);
  CHECK(runtime::parse_as<v1::AggregatorStatusReply>(empty.body)->jobs_size() == 0);

  // An operator's client key with a good grant, or the same request without one: refused.
  runtime::call_context op = site;
  op.peer = "client";
  auto theirs = logic.handle("loom.v1.StartAggregationRequest", start_request("acme", 7).SerializeAsString(), op);
  CHECK(theirs.code == errc::permission_denied);
  auto bare = start_request("acme", 7);
  bare.clear_grant();
  auto without = logic.handle("loom.v1.StartAggregationRequest", bare.SerializeAsString(), site);
  CHECK(without.code == errc::invalid_argument);
  CHECK(without.message.find("carries no aggregation grant") != std::string::npos);

  auto h = logic.handle("loom.v1.StartAggregationRequest", start_request("acme", 7).SerializeAsString(), site);
  REQUIRE_MESSAGE(h.code == errc::ok, h.message);
  auto started = runtime::parse_as<v1::StartAggregationReply>(h.body);
  REQUIRE(started.ok());
  CHECK(started->delta_endpoint() == "tcp://127.0.0.1:5555");
  CHECK(started->versions_size() == 2);
  CHECK_FALSE(started->resumed());
  CHECK_FALSE(started->starting());
  CHECK(h.audit_job_id == "job-7");
  auto again = logic.handle("loom.v1.StartAggregationRequest", start_request("acme", 7).SerializeAsString(), site);
  REQUIRE(again.code == errc::ok);
  CHECK(runtime::parse_as<v1::StartAggregationReply>(again.body)->resumed());
  v1::StartAggregationRequest bad = start_request("acme", 7);
  bad.mutable_spec()->set_codec("zip");
  auto refused = logic.handle("loom.v1.StartAggregationRequest", bad.SerializeAsString(), site);
  CHECK(refused.code == errc::invalid_argument);
  CHECK(refused.message.find("codec 'zip'") != std::string::npos);

  auto st = logic.handle("loom.v1.AggregatorStatusRequest", v1::AggregatorStatusRequest{}.SerializeAsString(), site);
  auto rep = runtime::parse_as<v1::AggregatorStatusReply>(st.body);
  REQUIRE(rep.ok());
  REQUIRE(rep->jobs_size() == 1);
  CHECK(rep->jobs(0).spec().job() == "job-7.pretrain");
  CHECK(rep->jobs(0).tenant() == "acme");
  CHECK(rep->jobs(0).fragments_size() == 2);
  CHECK(rep->round() == 0);
  // Another tenant's viewer sees nothing of it; an admin sees it.
  runtime::call_context other{"r", "viewer@beta", "viewer", "cloud", "beta", "client"};
  auto hidden = logic.handle("loom.v1.AggregatorStatusRequest", "", other);
  CHECK(runtime::parse_as<v1::AggregatorStatusReply>(hidden.body)->jobs_size() == 0);
  other.role = "admin";
  auto shown = logic.handle("loom.v1.AggregatorStatusRequest", "", other);
  CHECK(runtime::parse_as<v1::AggregatorStatusReply>(shown.body)->jobs_size() == 1);

  auto unknown = logic.handle("loom.v1.ImportDatasetRequest", "", site);
  CHECK(unknown.code == errc::unimplemented);
  CHECK(unknown.message == "aggregator does not handle loom.v1.ImportDatasetRequest");
  auto bad_body = logic.handle("loom.v1.AggregatorStatusRequest", "\xff\xff\xff", site);
  CHECK(bad_body.code == errc::invalid_argument);
  CHECK(bad_body.message == "body is not a valid loom.v1.AggregatorStatusRequest");
}
