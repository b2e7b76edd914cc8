// grant: an aggregation grant (loom.v1.AggregationGrant) — what the scheduler
// allows when it places a diloco stage, and the only way an aggregation comes
// to exist (issue 24, docs/security.md "Aggregations"). The scheduler signs
// it with the cloud's token key (every cloud service holds it; an edge site
// holds only its own), the trainers carry it, the aggregator verifies it.
//
// The MAC is HMAC-SHA256 over a canonical encoding of every field but `mac`,
// taken by reflection in field-number order (nested messages, repeated fields
// and defaults included), so a field added to the message later is covered
// without touching this code, and the bytes do not depend on how protobuf
// happened to serialise the message.
// Stateless functions; thread-safe.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::v1 {
class AggregationGrant;
}

namespace loom::diloco {

// A grant's terms, once verified: what the aggregator keeps with the aggregation.
struct grant_terms {
  std::string job, stage, tenant;
  std::string stage_dir;            // the only directory an export writes into
  std::vector<std::string> sites;   // by rank
  bool edge_sites = false;          // enrolled edge sites; else this deployment's site-0 ... site-(N-1)
  std::int64_t expires_unix = 0;
  bool granted(std::string_view site) const;
};

// The bytes the MAC covers (every field but `mac`), for tests and debugging.
std::string grant_canonical(const loom::v1::AggregationGrant& g);
// Sets g->mac. REQUIRES: key non-empty.
void sign_grant(loom::v1::AggregationGrant* g, std::string_view key);

// The grant's terms when its MAC is this key's and it has not expired at
// now_unix. permission_denied: no grant, a MAC that does not verify (not
// minted with this deployment's key, or altered), an expired grant;
// invalid_argument: a signed grant that is not a whole one (no job, stage,
// sites or spec; a stage dir that is not absolute; spec.job not the
// aggregation name of job and stage; this deployment's sites not site-0..N-1).
result<grant_terms> verify_grant(const loom::v1::AggregationGrant& g, std::string_view key, std::int64_t now_unix);
// As verify_grant, without the expiry: a saved aggregation reloaded at start
// (an expired one is then retired, not refused).
result<grant_terms> verify_grant_mac(const loom::v1::AggregationGrant& g, std::string_view key);

}  // namespace loom::diloco
