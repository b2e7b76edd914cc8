#include "libs/auth/identity.hpp"

#include <doctest/doctest.h>

using namespace loom::auth;

TEST_CASE("a site service's CURVE principal names its site and service") {
  auto p = parse_peer("site:north:trainer");
  CHECK(p.kind == peer_kind::site_service);
  CHECK(p.site == "north");
  CHECK(p.service == "trainer");
  CHECK(is_trainer_key(p));
  CHECK_FALSE(is_trainer_key(parse_peer("site:north:ingest")));
}

TEST_CASE("the deployment's own keys, its client, unenrolled and none are told apart") {
  CHECK(parse_peer("trainer").kind == peer_kind::own_service);
  CHECK(is_trainer_key(parse_peer("trainer")));
  CHECK(parse_peer("scheduler").service == "scheduler");
  CHECK(parse_peer("client").kind == peer_kind::client);
  CHECK_FALSE(is_trainer_key(parse_peer("client")));
  CHECK(parse_peer("unenrolled").kind == peer_kind::unenrolled);
  CHECK(parse_peer("").kind == peer_kind::none);
}

TEST_CASE("a malformed site principal claims no site") {
  for (const char* bad : {"site:", "site::trainer", "site:north:", "site:north", "site:a:b:c"}) {
    CAPTURE(bad);
    auto p = parse_peer(bad);
    CHECK(p.kind == peer_kind::own_service);
    CHECK(p.site.empty());
    CHECK_FALSE(is_trainer_key(p));
  }
}

TEST_CASE("a site token's principal is site:<name>, nothing else speaks for a site") {
  CHECK(site_of_token("site:north") == std::optional<std::string>("north"));
  CHECK(site_token_principal("south") == "site:south");
  CHECK_FALSE(site_of_token("admin"));
  CHECK_FALSE(site_of_token("site:"));
  CHECK_FALSE(site_of_token("site:north:trainer"));
  CHECK_FALSE(site_of_token("north"));
}

TEST_CASE("site, service and enrolment principals cannot be issued as tokens, others can") {
  for (const char* reserved : {"site:north", "site:north:trainer", "site:", "svc:scheduler", "unenrolled"}) {
    CAPTURE(reserved);
    auto r = issuable_principal(reserved);
    CHECK_FALSE(r.ok);
    CHECK(r.why.find("is reserved") != std::string::npos);
  }
  CHECK(issuable_principal("site:north").why.find("minted only by the cloud scheduler") != std::string::npos);
  for (const char* fine : {"alice", "ci@acme", "sites", "unenrolled2", "north:site"}) CHECK_MESSAGE(issuable_principal(fine).ok, fine);
}

TEST_CASE("a request's audit record belongs to its token's tenant unless the token acts for no tenant") {
  CHECK(record_tenant("alice", "acme") == "acme");
  CHECK(record_tenant("site:north", "default").empty());
  CHECK(record_tenant("svc:trainer", "default").empty());
  CHECK(record_tenant("", "").empty());
  CHECK(is_service_token("svc:cli"));
  CHECK_FALSE(is_service_token("service"));
}
