#include "libs/store/lease.hpp"

#include "libs/store/connection.hpp"

#include <mutex>

namespace loom::store {
namespace {

// Two rows per service: the lease itself (who, where, which epoch: changed
// only by a takeover, and read FOR SHARE by every fenced write) and its
// expiry (moved by every renewal). Kept apart so that renewals never wait for
// the leader's own writes, nor its writes for its renewals.
constexpr std::string_view create_sql =
    "CREATE TABLE IF NOT EXISTS loom_leases ("
    " service TEXT NOT NULL PRIMARY KEY,"
    " holder TEXT NOT NULL,"
    " endpoint TEXT NOT NULL,"
    " epoch BIGINT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS loom_lease_expiry ("
    " service TEXT NOT NULL PRIMARY KEY,"
    " holder TEXT NOT NULL,"
    " epoch BIGINT NOT NULL,"
    " expires_ms BIGINT NOT NULL)";

std::string now_sql(backend b) {
  return b == backend::postgres ? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
                                : "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
}

struct fence_state {
  std::mutex mu;
  std::string service;  // guarded by mu; "" = no fence
  std::atomic<std::int64_t> epoch{0};
};
fence_state& fence() {
  static fence_state f;
  return f;
}

// The lease, read inside `tx` (PostgreSQL: its loom_leases row locked FOR
// UPDATE when `lock`: a takeover waits for the fenced writes in flight).
result<std::optional<lease>> read_in(transaction& tx, std::string_view service, bool lock) {
  // One statement (one round trip): the store's clock with the row.
  std::string sql = "SELECT l.holder, l.endpoint, l.epoch, e.expires_ms, " + now_sql(tx.kind()) +
                    " FROM loom_leases l JOIN loom_lease_expiry e ON e.service = l.service WHERE l.service = $1";
  if (lock && tx.kind() == backend::postgres) sql += " FOR UPDATE OF l";
  auto rows = tx.query(sql, {value(std::string(service))});
  if (!rows) return rows.err();
  if (rows->empty()) return std::optional<lease>();
  const auto& r = (*rows)[0];
  auto holder = r.get_text(0);
  auto endpoint = r.get_text(1);
  auto epoch = r.get_i64(2);
  auto expires = r.get_i64(3);
  auto now = r.get_i64(4);
  if (!holder || !endpoint || !epoch || !expires || !now)
    return make_error(errc::corruption, "loom_leases row of " + std::string(service) + " is damaged");
  return std::optional<lease>(lease{std::string(service), *holder, *endpoint, *epoch, *expires, *now});
}

// The lease's own writes never obey the fence (a standby takes the lease).
struct unfenced {
  database& db;
  bool was;
  explicit unfenced(database& d) : db(d), was(d.fenced()) { db.set_fenced(false); }
  ~unfenced() { db.set_fenced(was); }
};

std::string describe(const lease& l) {
  return l.holder + " at epoch " + std::to_string(l.epoch) +
         (l.live() ? " (" + std::to_string(l.left_ms()) + " ms left)" : " (expired)");
}

}  // namespace

status ensure_lease_table(database& db) {
  const unfenced u(db);
  return db.with_transaction([](transaction& tx) -> status {
    // PostgreSQL: replicas starting together would race in CREATE TABLE IF
    // NOT EXISTS (a unique violation in pg_type); one at a time.
    if (tx.kind() == backend::postgres)
      if (auto r = tx.query("SELECT pg_advisory_xact_lock(CAST($1 AS BIGINT))", {value(std::int64_t{0x6c6c7365})}); !r)
        return r.err();
    return tx.exec_script(create_sql);
  });
}

result<std::int64_t> store_now_ms(transaction& tx) {
  auto rows = tx.query("SELECT " + now_sql(tx.kind()));
  if (!rows) return rows.err();
  if (rows->empty()) return make_error(errc::internal, "the store's clock answered no row");
  return (*rows)[0].get_i64(0);
}

result<lease> acquire_lease(database& db, std::string_view service, std::string_view holder,
                            std::string_view endpoint, std::chrono::milliseconds ttl) {
  if (service.empty() || holder.empty())
    return make_error(errc::invalid_argument, "a lease needs a service and a holder");
  const unfenced u(db);
  return db.with_transaction([&](transaction& tx) -> result<lease> {
    // A takeover must not wait for ever behind a partitioned writer's lock:
    // its session is ended by idle_in_transaction_session_timeout (the fence).
    if (tx.kind() == backend::postgres) {
      if (auto r = tx.exec("SET LOCAL lock_timeout = '1500ms'"); !r) return r.err();
    }
    auto cur = read_in(tx, service, true);
    if (!cur) return cur.err();
    const std::string s(service), h(holder), ep(endpoint);
    if (!*cur) {
      auto now = store_now_ms(tx);
      if (!now) return now.err();
      lease l{s, h, ep, 1, *now + ttl.count(), *now};
      auto r = tx.exec("INSERT INTO loom_leases (service, holder, endpoint, epoch) VALUES ($1, $2, $3, 1)",
                       {value(s), value(h), value(ep)});
      if (!r) return r.err();
      r = tx.exec("INSERT INTO loom_lease_expiry (service, holder, epoch, expires_ms) VALUES ($1, $2, 1, $3)",
                  {value(s), value(h), value(l.expires_ms)});
      if (!r) return r.err();
      return l;
    }
    lease l = **cur;
    if (l.holder == h && l.live()) {  // ours: renew
      l.expires_ms = l.now_ms + ttl.count();
      auto r = tx.exec("UPDATE loom_lease_expiry SET expires_ms = $2 WHERE service = $1 AND epoch = $3",
                       {value(s), value(l.expires_ms), value(l.epoch)});
      if (!r) return r.err();
      return l;
    }
    if (l.live()) return l;  // another's: the caller is a standby
    // Expired: take it, unless its holder renewed it meanwhile (the renewal
    // does not lock loom_leases; its expiry row tells).
    const std::int64_t old_epoch = l.epoch;
    l.holder = h;
    l.endpoint = ep;
    l.epoch += 1;
    l.expires_ms = l.now_ms + ttl.count();
    auto taken = tx.exec(
        "UPDATE loom_lease_expiry SET holder = $2, epoch = $3, expires_ms = $4 "
        "WHERE service = $1 AND epoch = $5 AND expires_ms <= $6",
        {value(s), value(h), value(l.epoch), value(l.expires_ms), value(old_epoch), value(l.now_ms)});
    if (!taken) return taken.err();
    if (*taken != 1) return **cur;  // renewed in time: still the other's
    auto r = tx.exec("UPDATE loom_leases SET holder = $2, endpoint = $3, epoch = $4 WHERE service = $1",
                     {value(s), value(h), value(ep), value(l.epoch)});
    if (!r) return r.err();
    return l;
  });
}

result<lease> renew_lease(database& db, std::string_view service, std::string_view holder, std::int64_t epoch,
                          std::chrono::milliseconds ttl) {
  const unfenced u(db);
  return db.with_transaction([&](transaction& tx) -> result<lease> {
    // Still ours if nobody took it, even past its expiry: the epoch only
    // moves on a takeover, and the fence follows the epoch. One statement:
    // a renewal is what must get through on a busy machine.
    const std::string now = now_sql(tx.kind());
    auto rows = tx.query("UPDATE loom_lease_expiry SET expires_ms = " + now +
                             " + $4 WHERE service = $1 AND holder = $2 AND epoch = $3 RETURNING expires_ms, " + now,
                         {value(std::string(service)), value(std::string(holder)), value(epoch),
                          value(static_cast<std::int64_t>(ttl.count()))});
    if (!rows) return rows.err();
    if (rows->size() == 1) {
      auto expires = (*rows)[0].get_i64(0);
      auto at = (*rows)[0].get_i64(1);
      if (!expires || !at) return make_error(errc::corruption, "loom_lease_expiry row of " + std::string(service) + " is damaged");
      return lease{std::string(service), std::string(holder), "", epoch, *expires, *at};
    }
    auto cur = read_in(tx, service, false);
    if (!cur) return cur.err();
    if (!*cur) return make_error(errc::permission_denied, "deposed: " + std::string(service) + " has no lease");
    return make_error(errc::permission_denied, "deposed: " + std::string(service) + " epoch " + std::to_string(epoch) +
                                                   " of " + std::string(holder) + " was taken over by " +
                                                   describe(**cur));
  });
}

status release_lease(database& db, std::string_view service, std::string_view holder, std::int64_t epoch) {
  const unfenced u(db);
  return db.with_transaction([&](transaction& tx) -> status {
    auto now = store_now_ms(tx);
    if (!now) return now.err();
    auto r = tx.exec("UPDATE loom_lease_expiry SET expires_ms = $4 WHERE service = $1 AND holder = $2 AND epoch = $3",
                     {value(std::string(service)), value(std::string(holder)), value(epoch), value(*now)});
    if (!r) return r.err();
    return ok_status();
  });
}

result<std::optional<lease>> read_lease(database& db, std::string_view service) {
  return db.with_read_transaction([&](transaction& tx) { return read_in(tx, service, false); });
}

void set_write_fence(std::string service) {
  auto& f = fence();
  std::lock_guard lock(f.mu);
  f.service = std::move(service);
  f.epoch = 0;
}
void set_fence_epoch(std::int64_t epoch) { fence().epoch = epoch; }
std::string fence_service() {
  auto& f = fence();
  std::lock_guard lock(f.mu);
  return f.service;
}
std::int64_t fence_epoch() { return fence().epoch.load(); }
void clear_write_fence() { set_write_fence(""); }

namespace detail {

status check_write_fence(connection& c) {
  const std::string service = fence_service();
  if (service.empty()) return ok_status();
  const std::int64_t mine = fence_epoch();
  // PostgreSQL: FOR SHARE makes a takeover (UPDATE of the row) wait for this
  // transaction, and a transaction after the takeover see the new epoch. A
  // writer cut off mid-transaction holds that lock only until the server
  // ends its session (idle in transaction for 2 s).
  const bool pg = c.kind() == backend::postgres;
  const std::string sql = pg ? "SELECT epoch, holder, set_config('idle_in_transaction_session_timeout', '2000', false) "
                               "FROM loom_leases WHERE service = $1 FOR SHARE"
                             : "SELECT epoch, holder FROM loom_leases WHERE service = $1";
  const value params[] = {value(service)};
  auto rows = c.query(sql, params);
  if (!rows) return rows.err();
  if (rows->empty())
    return make_error(errc::permission_denied, "fenced: " + service + " has no lease, so no replica may write");
  auto epoch = (*rows)[0].get_i64(0);
  auto holder = (*rows)[0].get_text(1);
  if (!epoch || !holder) return make_error(errc::corruption, "loom_leases row of " + service + " is damaged");
  if (*epoch == mine && mine != 0) return ok_status();
  if (mine == 0)
    return make_error(errc::permission_denied, "fenced: this " + service + " replica is a standby; " + *holder +
                                                   " leads at epoch " + std::to_string(*epoch));
  return make_error(errc::permission_denied, "fenced: this " + service + " replica's epoch " + std::to_string(mine) +
                                                 " was deposed; " + *holder + " leads at epoch " +
                                                 std::to_string(*epoch));
}

}  // namespace detail
}  // namespace loom::store
