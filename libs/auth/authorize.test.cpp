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
