#include "libs/auth/authorize.hpp"

#include <doctest/doctest.h>

using namespace loom::auth;
using loom::errc;

namespace {
const std::string key = "authorize-test-key-fixed-32bytes";
constexpr std::int64_t now = 1'700'000'000;
const auth_context ctx{key, now, 3, "eu-west"};

std::string token_for(role r, std::vector<std::string> zones = {"eu-west"}, std::uint64_t epoch = 3) {
  auto t = issue_token(claims{"bob", r, std::move(zones), now + 60, epoch, now - 60}, key);
  REQUIRE(t.ok());
  return *t;
}
}  // namespace

TEST_CASE("an operator in its zone may call an operator request") {
  auto d = authorize("loom.v1.DrainNodeRequest", token_for(role::operator_), ctx);
  CHECK(d.allowed);
  CHECK(d.code == errc::ok);
  CHECK(d.mutating);
  REQUIRE(d.who.has_value());
  CHECK(d.who->principal == "bob");
}

TEST_CASE("a viewer calling an operator request is denied and still identified") {
  auto d = authorize("loom.v1.DrainNodeRequest", token_for(role::viewer), ctx);
  CHECK_FALSE(d.allowed);
  CHECK(d.code == errc::permission_denied);
  CHECK(d.reason == "role viewer may not call loom.v1.DrainNodeRequest (needs operator)");
  REQUIRE(d.who.has_value());
  CHECK(d.who->principal == "bob");
  CHECK(d.mutating);
}

TEST_CASE("an unknown request type is denied even for an admin") {
  auto d = authorize("loom.v1.FormatDiskRequest", token_for(role::admin, {"*"}), ctx);
  CHECK_FALSE(d.allowed);
  CHECK(d.code == errc::permission_denied);
  CHECK(d.reason == "no policy for request type loom.v1.FormatDiskRequest: denied");
  CHECK_FALSE(d.who.has_value());
}

TEST_CASE("a request without a token is unauthenticated") {
  auto d = authorize("loom.v1.PingRequest", "", ctx);
  CHECK_FALSE(d.allowed);
  CHECK(d.code == errc::unauthenticated);
  CHECK_FALSE(d.who.has_value());
}

TEST_CASE("a token for other zones may not act in this one") {
  auto d = authorize("loom.v1.PingRequest", token_for(role::admin, {"us-east", "lab"}), ctx);
  CHECK_FALSE(d.allowed);
  CHECK(d.code == errc::permission_denied);
  CHECK(d.reason == "principal bob may not act in zone eu-west");
  CHECK(d.who.has_value());
  CHECK(authorize("loom.v1.PingRequest", token_for(role::viewer, {"*"}), ctx).allowed);
}

TEST_CASE("a revoked, expired or foreign-key token is unauthenticated with the verifier's reason") {
  auto d = authorize("loom.v1.PingRequest", token_for(role::admin, {"*"}, 2), ctx);
  CHECK(d.code == errc::unauthenticated);
  CHECK(d.reason == "token epoch 2 revoked (current epoch 3)");
  auto late = ctx;
  late.now_unix_s = now + 60;
  d = authorize("loom.v1.PingRequest", token_for(role::admin), late);
  CHECK(d.code == errc::unauthenticated);
  CHECK(d.reason.starts_with("token expired at "));
  auto other = ctx;
  other.key = "a different key, also 32 bytes!!";
  d = authorize("loom.v1.PingRequest", token_for(role::admin), other);
  CHECK(d.code == errc::unauthenticated);
  CHECK(d.reason == "forged or corrupted token: signature mismatch");
  CHECK_FALSE(d.allowed);
}

TEST_CASE("a viewer may call every viewer request and no request above it") {
  auto tok = token_for(role::viewer);
  for (const char* t : {"loom.v1.PingRequest", "loom.v1.HealthRequest", "loom.v1.ListNodesRequest"})
    CHECK_MESSAGE(authorize(t, tok, ctx).allowed, t);
  for (const char* t : {"loom.v1.CrashRequest", "loom.v1.BulkOffer", "loom.v1.AuditQueryRequest"})
    CHECK_MESSAGE(authorize(t, tok, ctx).code == errc::permission_denied, t);
  CHECK(authorize("loom.v1.CrashRequest", token_for(role::operator_), ctx).code == errc::permission_denied);
  CHECK(authorize("loom.v1.CrashRequest", token_for(role::admin), ctx).allowed);
}

TEST_CASE("a site's enrolment passes without a bearer token and is marked state-changing, its admin requests do not") {
  auto d = authorize("loom.v1.EnrolSiteRequest", "", ctx);
  CHECK(d.allowed);
  CHECK(d.mutating);
  CHECK_FALSE(d.who.has_value());
  CHECK(authorize("loom.v1.IssueSiteTokenRequest", "", ctx).code == errc::unauthenticated);
  CHECK(authorize("loom.v1.IssueSiteTokenRequest", token_for(role::operator_), ctx).code == errc::permission_denied);
  CHECK(authorize("loom.v1.RevokeSiteRequest", token_for(role::admin), ctx).allowed);
  CHECK(authorize("loom.v1.ListSitesRequest", token_for(role::viewer), ctx).allowed);
}

namespace {
std::string site_token(const std::string& site, std::vector<std::string> zones = {"eu-west", "north"}) {
  auto t = issue_token(claims{"site:" + site, role::operator_, std::move(zones), now + 60, 3, now - 60}, key);
  REQUIRE(t.ok());
  return *t;
}
auth_context over(std::string_view peer, std::function<bool(std::string_view)> admitted = {}) {
  auto c = ctx;
  c.peer = peer;
  c.site_admitted = std::move(admitted);
  return c;
}
}  // namespace

TEST_CASE("a site's token over its own key may send its site's business and nothing else") {
  const auto tok = site_token("north");
  const auto mine = over("site:north:trainer", [](std::string_view s) { return s == "north"; });
  for (const char* t : {"loom.v1.PingRequest", "loom.v1.HealthRequest", "loom.v1.RegisterNodeRequest",
                        "loom.v1.NodeHeartbeatRequest", "loom.v1.PollWorkRequest", "loom.v1.DrainNodeRequest",
                        "loom.v1.StartAggregationRequest", "loom.v1.ExportGlobalRequest"}) {
    auto d = authorize(t, tok, mine);
    CHECK_MESSAGE(d.allowed, t << ": " << d.reason);
  }
  // What it did as a full operator before: cancel, submit, read the audit, issue, list.
  for (const char* t : {"loom.v1.CancelJobRequest", "loom.v1.SubmitJobRequest", "loom.v1.AuditQueryRequest",
                        "loom.v1.ListJobsRequest", "loom.v1.ImportDatasetRequest", "loom.v1.AuditWatermarkRequest",
                        "loom.v1.RollbackModelRequest", "loom.v1.BulkOffer"}) {
    auto d = authorize(t, tok, mine);
    CHECK_FALSE_MESSAGE(d.allowed, t);
    CHECK(d.code == errc::permission_denied);
    CHECK(d.reason == "a site token acts only for its site: " + std::string(t) + " is not site business");
    REQUIRE(d.who.has_value());  // the caller is named in the audit record
    CHECK(d.who->principal == "site:north");
  }
}

TEST_CASE("a site's token is accepted only over that site's own keys") {
  const auto tok = site_token("north");
  for (const char* peer : {"site:south:trainer", "client", "trainer", "scheduler", "unenrolled", ""}) {
    auto d = authorize("loom.v1.PingRequest", tok, over(peer, [](std::string_view) { return true; }));
    CHECK_FALSE_MESSAGE(d.allowed, peer);
    CHECK(d.code == errc::permission_denied);
    CHECK_MESSAGE(d.reason.starts_with("a site token acts only for its site: the token of site north is accepted "
                                       "only over that site's own CURVE keys, not "),
                  d.reason);
  }
  CHECK(authorize("loom.v1.PingRequest", tok, over("site:north:client")).allowed);  // admission not known here
}

TEST_CASE("a revoked site's token is dead everywhere, its business included") {
  const auto tok = site_token("north");
  auto revoked = over("site:north:trainer", [](std::string_view s) { return s != "north"; });
  for (const char* t : {"loom.v1.PingRequest", "loom.v1.NodeHeartbeatRequest", "loom.v1.CancelJobRequest"}) {
    auto d = authorize(t, tok, revoked);
    CHECK_FALSE(d.allowed);
    CHECK(d.code == errc::permission_denied);
    CHECK(d.reason == "the token of site north is dead: the site has no admitted CURVE key (revoked)");
  }
  // Another site's revocation does not touch it.
  CHECK(authorize("loom.v1.PingRequest", site_token("south"),
                  over("site:south:trainer", [](std::string_view s) { return s != "north"; }))
            .allowed);
}

TEST_CASE("tokens of other principals are not bound to a key by the site rule") {
  for (const char* peer : {"client", "trainer", "site:north:trainer"}) {
    auto d = authorize("loom.v1.CancelJobRequest", token_for(role::operator_), over(peer, [](std::string_view) {
                         return false;
                       }));
    CHECK_MESSAGE(d.allowed, peer << ": " << d.reason);
  }
}
