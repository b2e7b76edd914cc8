#include "libs/auth/policy.hpp"

#include <doctest/doctest.h>

#include <set>
#include <string>

using namespace loom::auth;

TEST_CASE("every policy entry has a unique type and says what it is for") {
  std::set<std::string_view> seen;
  REQUIRE(policy_table().size() == 51);
  for (const auto& e : policy_table()) {
    CHECK_MESSAGE(!e.what.empty(), e.type);
    CHECK_MESSAGE(e.type.starts_with("loom.v1."), e.type);
    CHECK_MESSAGE(seen.insert(e.type).second, "duplicate " << e.type);
    CHECK(find_policy(e.type) == &e);
  }
}

TEST_CASE("the table gives the agreed role and mutation flag per request type") {
  struct { std::string_view type; role r; bool mutating; } want[] = {
      {"loom.v1.PingRequest", role::viewer, false},
      {"loom.v1.CrashRequest", role::admin, true},
      {"loom.v1.RegisterNodeRequest", role::operator_, true},
      {"loom.v1.ListNodesRequest", role::viewer, false},
      {"loom.v1.AuditQueryRequest", role::operator_, false},
      {"loom.v1.AuditArchiveRequest", role::admin, true},
      {"loom.v1.BulkChunk", role::operator_, true},
      {"loom.v1.SubmitJobRequest", role::operator_, true},
      {"loom.v1.CancelJobRequest", role::operator_, true},
      {"loom.v1.RecordModelExportRequest", role::operator_, true},
      {"loom.v1.GetJobRequest", role::viewer, false},
      {"loom.v1.PollWorkRequest", role::operator_, false},
      {"loom.v1.VerifyDatasetRequest", role::operator_, true},
      {"loom.v1.PlaceDatasetRequest", role::operator_, true},
      {"loom.v1.UndrainNodeRequest", role::operator_, true},
      {"loom.v1.ResolveModelVersionRequest", role::operator_, false},
      {"loom.v1.StartModelExportRequest", role::operator_, true},
      {"loom.v1.GetModelExportRequest", role::operator_, false},
      {"loom.v1.FetchModelExportRequest", role::operator_, false},
      {"loom.v1.EndModelExportRequest", role::operator_, true},
      {"loom.v1.InspectCheckpointRequest", role::operator_, false},
  };
  for (const auto& w : want) {
    const policy_entry* p = find_policy(w.type);
    REQUIRE_MESSAGE(p != nullptr, w.type);
    CHECK(p->min_role == w.r);
    CHECK(p->mutating == w.mutating);
  }
}

TEST_CASE("only a site's enrolment carries its credential in the body instead of a bearer token") {
  int token_free_types = 0;
  for (const auto& e : policy_table()) token_free_types += token_free(e.type);
  CHECK(token_free_types == 1);
  CHECK(token_free("loom.v1.EnrolSiteRequest"));
  CHECK_FALSE(token_free("loom.v1.IssueSiteTokenRequest"));
  CHECK(find_policy("loom.v1.IssueSiteTokenRequest")->min_role == role::admin);
  CHECK(find_policy("loom.v1.RevokeSiteRequest")->min_role == role::admin);
  CHECK(find_policy("loom.v1.ListSitesRequest")->min_role == role::viewer);
  // Own service keys only (the scheduler checks the key): not a site's business.
  REQUIRE(find_policy("loom.v1.SiteKeysRequest"));
  CHECK_FALSE(find_policy("loom.v1.SiteKeysRequest")->site_business);
}

TEST_CASE("a checkpoint inspection is the aggregator's, read-only, never a site's business nor token-free") {
  // The role is what the scheduler's service token carries; the aggregator
  // itself admits only the scheduler's key (services/aggregator/checkpoint_inspect.hpp).
  const policy_entry* p = find_policy("loom.v1.InspectCheckpointRequest");
  REQUIRE(p != nullptr);
  CHECK(p->service == "aggregator");
  CHECK(p->min_role == role::operator_);
  CHECK_FALSE(p->mutating);
  CHECK_FALSE(p->site_business);
  CHECK_FALSE(token_free(p->type));
}

TEST_CASE("a type missing from the table has no policy") {
  CHECK(find_policy("loom.v1.DeleteEverythingRequest") == nullptr);
  CHECK(find_policy("PingRequest") == nullptr);
  CHECK(find_policy("") == nullptr);
}

TEST_CASE("a site's business is the node, drain, undrain and aggregation requests and the probes, nothing else") {
  std::set<std::string_view> business;
  for (const auto& e : policy_table())
    if (e.site_business) business.insert(e.type);
  const std::set<std::string_view> want = {
      "loom.v1.PingRequest",          "loom.v1.HealthRequest",          "loom.v1.ReplicaStatusRequest",
      "loom.v1.RegisterNodeRequest",
      "loom.v1.NodeHeartbeatRequest", "loom.v1.PollWorkRequest",        "loom.v1.DrainNodeRequest",  "loom.v1.UndrainNodeRequest",
      "loom.v1.StartAggregationRequest", "loom.v1.ExportGlobalRequest"};
  CHECK(business == want);
  // Never an admin's request, never the audit trail, never another tenant's objects.
  for (const auto& e : policy_table())
    if (e.site_business) CHECK_MESSAGE(e.min_role != role::admin, e.type);
}
