// loom::auth identity: who is speaking, read from the two credentials every
// request arrives with (docs/security.md, "Identity"). The connection's CURVE
// principal (the ZAP user id the gateway hands the logic as call_context::peer)
// says which process or site sent it; the bearer token's principal says on
// whose behalf. Pure functions over strings, no state: used by the gateways and
// by every service's logic, so each reads identities the same way.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loom::auth {

// The kinds of CURVE principal a deployment admits.
enum class peer_kind {
  own_service,  // a service process of this deployment: "scheduler", "trainer", "ingest", ...
  client,       // the deployment's client key ("client"): loom, tests, operators' tools
  site_service, // an enrolled edge site's service: "site:<site>:<service>"
  unenrolled,   // an unknown key on the enrolment socket (libs/wire/curve.hpp)
  none,         // no CURVE principal (plaintext in-process calls, tests)
};

struct peer_id {
  peer_kind kind = peer_kind::none;
  std::string site;     // site_service: the site's name
  std::string service;  // own_service / site_service: "trainer", "ingest", ...
};

// Reads a ZAP principal. "site:<s>:<svc>" with both parts non-empty is a
// site_service; "site:" prefixes that do not parse are own_service named as
// given (never a site: a malformed name cannot claim one).
peer_id parse_peer(std::string_view principal);

// A trainer process's key: this deployment's "trainer" or a site's
// "site:<s>:trainer". Node-scoped requests (register, heartbeat, poll) come
// only from these.
bool is_trainer_key(const peer_id& p);

// The site a bearer token's principal speaks for: "site:<s>" → <s>; nullopt
// for every other principal. Site tokens are minted only by the cloud
// scheduler at enrolment; `loom token issue` refuses principals of this form.
std::optional<std::string> site_of_token(std::string_view token_principal);

// The token principal a site's enrolment token carries.
std::string site_token_principal(std::string_view site);

// A token a service minted for its own calls with the deployment's token key
// (libs/runtime/service_main.cpp; the CLI's audit spool): principal "svc:<name>".
bool is_service_token(std::string_view token_principal);

// Whether an operator may issue a token for `principal` (`loom token issue`,
// IssueTokenRequest, `--offline`): ok, or permission_denied saying why.
// Reserved are "site:*" (a site's token is minted by the cloud scheduler at
// enrolment, bound to the site's keys and revoked with them), "svc:*" (the
// services' own tokens) and "unenrolled" (the enrolment socket's principal
// for unknown keys): a token issued under one of them would pass for it.
struct issuable_result {
  bool ok = true;
  std::string why;  // when !ok
};
issuable_result issuable_principal(std::string_view principal);

// The tenant a request's audit record belongs to: the token's tenant, or ""
// (admins only) for tokens that act for no tenant: a site's and a service's.
std::string record_tenant(std::string_view token_principal, std::string_view token_tenant);

}  // namespace loom::auth
