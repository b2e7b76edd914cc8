// Leadership leases with fencing epochs (issue 30): one active replica of a
// service (the scheduler) at a time over a shared store, and a store that
// refuses the writes of a replica that was deposed.
//
// A lease is a row of loom_leases: the service, the holder (a replica's
// incarnation: node id + a random suffix, so a restarted process never
// inherits its predecessor's lease), the endpoint clients are sent to, the
// epoch and when it expires. Time is the store's own clock (PostgreSQL's
// clock_timestamp(), SQLite's julianday('now')), so replicas on hosts whose
// clocks disagree still agree on when a lease ran out.
//   * acquire_lease: takes a free or expired lease with epoch + 1, or renews
//     the caller's own live one (same epoch); another's live lease is returned
//     as it is (the caller is a standby and learns who leads).
//   * renew_lease: extends the lease only while holder and epoch still match;
//     permission_denied "deposed" otherwise.
//   * release_lease: a clean step-down; the lease expires at once.
// The write fence (set_write_fence): once installed in a process, every
// write transaction of every database the process opens first checks, in the
// same transaction, that the store's epoch for the service is the fence's
// (PostgreSQL: the row read FOR SHARE, so a takeover waits for writes in
// flight and a write after it sees the new epoch; SQLite: BEGIN IMMEDIATE
// serialises them). A mismatch — a standby (fence epoch 0) or a deposed
// leader — fails the transaction with permission_denied naming both epochs,
// before the caller's work runs. Connections that must write while not
// leading (the lease's own) opt out with database::set_fenced(false).
// Thread-safe (the fence is process-wide; each database is one thread's).
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace loom::store {

struct lease {
  std::string service;
  std::string holder;    // "" when nobody ever held it
  std::string endpoint;  // where the holder serves (its advertised rpc endpoint)
  std::int64_t epoch = 0;
  std::int64_t expires_ms = 0;  // the store's clock, ms since 1970
  std::int64_t now_ms = 0;      // the store's clock when this was read
  bool live() const { return !holder.empty() && expires_ms > now_ms; }
  std::int64_t left_ms() const { return live() ? expires_ms - now_ms : 0; }
};

// CREATE TABLE IF NOT EXISTS loom_leases (both engines).
status ensure_lease_table(database& db);

// The store's clock (ms since 1970) as one statement sees it.
result<std::int64_t> store_now_ms(transaction& tx);

result<lease> acquire_lease(database& db, std::string_view service, std::string_view holder,
                            std::string_view endpoint, std::chrono::milliseconds ttl);
result<lease> renew_lease(database& db, std::string_view service, std::string_view holder, std::int64_t epoch,
                          std::chrono::milliseconds ttl);
status release_lease(database& db, std::string_view service, std::string_view holder, std::int64_t epoch);
// nullopt when the service has no lease row yet.
result<std::optional<lease>> read_lease(database& db, std::string_view service);

// The process's write fence: `service`'s lease must carry `epoch` (0 = this
// process leads nothing: every fenced write is refused). Installed once;
// set_fence_epoch moves it on as leadership comes and goes.
void set_write_fence(std::string service);
void set_fence_epoch(std::int64_t epoch);
// The fence's service and epoch; service "" when no fence is installed.
std::string fence_service();
std::int64_t fence_epoch();
// Test hook: removes the fence (a process that installed one keeps it otherwise).
void clear_write_fence();

}  // namespace loom::store
