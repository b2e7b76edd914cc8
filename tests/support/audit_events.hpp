// Test support for cross-process audit checks (header-only, doctest): the
// audit log of a running `loom up` as its audit service answers it, and the
// accounting of denials, which the gateways merge when identical
// (libs/runtime/denial_merge.hpp). One thread at a time per cluster.
#pragma once

#include "tests/support/cluster.hpp"

#include "libs/wire/envelope_pb.hpp"
#include "loom/v1/audit.pb.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

namespace loom::test {

// One request of `type` with a serialized `body`; a missing reply fails the test.
inline wire::reply send(wire::client& c, const std::string& type, const std::string& body, const std::string& token,
                        const std::string& rid) {
  wire::request req{rid, type, body, token};
  auto r = c.call(req);
  REQUIRE_MESSAGE(r.ok(), "no reply to " << type << ": " << (r.ok() ? "" : r.err().message));
  return *r;
}

// Every chained audit event, paged by chain seq.
inline std::vector<loom::v1::AuditEvent> all_events(cluster& c) {
  auto cli = c.client("audit", 1, std::chrono::milliseconds(10000));
  std::vector<loom::v1::AuditEvent> out;
  std::uint64_t after = 0;
  for (;;) {
    loom::v1::AuditQueryRequest q;
    q.set_after_chain_seq(after);
    q.set_limit(10000);
    auto rep = send(*cli, "loom.v1.AuditQueryRequest", q.SerializeAsString(), c.admin(), wire::new_request_id());
    REQUIRE_MESSAGE(rep.ok(), rep.message);
    loom::v1::AuditQueryReply r;
    REQUIRE(r.ParseFromString(rep.body));
    if (r.events_size() == 0) return out;
    for (auto& e : r.events()) {
      after = std::max<std::uint64_t>(after, e.seq());
      out.push_back(e);
    }
  }
}

// How often each request id appears, once `want` of them have arrived (or 60 s).
inline std::map<std::string, int> count_by_request(cluster& c, const std::set<std::string>& want) {
  std::map<std::string, int> seen;
  for (int round = 0; round < 120; ++round) {
    seen.clear();
    for (auto& e : all_events(c))
      if (want.count(e.request_id())) ++seen[e.request_id()];
    if (seen.size() >= want.size()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return seen;
}

// Denials as the audit log tells them, by (service, principal, action,
// reason): records of their own whose request id is in `rids`, plus the
// counts of merged-denial summaries whose first merged request is in `rids`
// (libs/runtime/denial_merge.hpp). `own` counts each own record's request id.
using denial_key = std::tuple<std::string, std::string, std::string, std::string>;
struct denial_tally {
  std::map<denial_key, std::uint64_t> by_key;
  std::map<std::string, int> own;
};
inline denial_tally tally_denials(const std::vector<loom::v1::AuditEvent>& evs, const std::set<std::string>& rids) {
  denial_tally t;
  for (const auto& e : evs) {
    if (e.decision() != loom::v1::DENY) continue;
    denial_key k{e.service(), e.principal(), e.action(), e.reason()};
    if (rids.count(e.request_id())) {
      ++t.own[e.request_id()];
      ++t.by_key[k];
      continue;
    }
    auto j = nlohmann::json::parse(e.payload(), nullptr, false);
    if (e.request_id().empty() && j.is_object() && rids.count(j.value("first_request_id", "")))
      t.by_key[k] += j.value("merged_denials", std::uint64_t{0});
  }
  return t;
}

// Waits (up to 40 s: the 10 s merge window and the spool) until the log
// accounts for every expected denial, then returns the tally.
inline denial_tally wait_for_denials(cluster& c, const std::map<denial_key, std::uint64_t>& expected,
                                     const std::set<std::string>& rids) {
  denial_tally t;
  for (int round = 0; round < 80; ++round) {
    t = tally_denials(all_events(c), rids);
    if (t.by_key == expected) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  return t;
}

}  // namespace loom::test
