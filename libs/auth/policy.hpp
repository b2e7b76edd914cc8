// The policy table: for every request type a service accepts, the least role
// that may call it, whether it changes state (mutating calls are audited) and
// whether it is an edge site's business (the only types a site's token may
// send). Immutable static data; safe from any thread. A type not in the table
// is denied.
#pragma once

#include "libs/auth/token.hpp"

#include <span>
#include <string_view>

namespace loom::auth {

struct policy_entry {
  std::string_view type;  // fully qualified protobuf message name, "loom.v1.PingRequest"
  role min_role;
  bool mutating;
  std::string_view what;  // one line for humans (docs, `loom policy` listings)
  // Which service answers it: "audit", "scheduler", "ingest", "trainer",
  // "aggregator", or "*" (every service: the runtime's built-ins).
  std::string_view service;
  // A site's business: what an enrolled edge site's own bearer token
  // (principal "site:<S>", minted by the cloud scheduler at enrolment) may
  // send, over that site's own CURVE keys only (authorize.hpp). Every other
  // type from a site token is denied. Last and defaulted, so rows that do not
  // name it are not site business.
  bool site_business = false;
};

// Every entry, in table order.
std::span<const policy_entry> policy_table();
// Whether `type` carries its credential in its body instead of a bearer token
// (an edge site's EnrolSiteRequest: its one-time enrolment token). authorize()
// admits such a request without a token; the service's logic authenticates it.
bool token_free(std::string_view type);
// The entry for `type`, or nullptr when there is none (callers must deny).
const policy_entry* find_policy(std::string_view type);

}  // namespace loom::auth
