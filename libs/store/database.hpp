// loom::store::database: EdgeLoom's state store — one interface, two engines.
//   * SQLite (default): a file, e.g. <data dir>/loom.db; WAL, synchronous=FULL,
//     foreign_keys=ON; a writer waits up to 5 s for another's write lock (a busy
//     handler polling every ≤1 ms). For one edge box, no server.
//   * PostgreSQL (LOOM_DATABASE_URL=postgresql://…) via libpqxx, for several hosts.
// Work happens in transactions: with_transaction(fn) begins, runs fn, commits;
// it rolls back when fn returns an error, when any statement failed (even if fn
// ignored it), or when fn throws. No libpqxx/SQLite type or exception leaves the
// library; every failure is a loom::errc (table below).
//
// SQL dialect callers write (runs unchanged on both engines):
//   * placeholders $1, $2, … (may repeat, any order); each call passes exactly
//     as many parameters as the highest $N used.
//   * column types BIGINT, INTEGER, TEXT, DOUBLE PRECISION, BYTEA (SQLite gives
//     BYTEA blob affinity, so it behaves as BLOB). No BOOLEAN: use BIGINT 0/1.
//   * PostgreSQL infers a parameter's type from its context; where there is none
//     (SELECT $1 + 1) write CAST($1 AS BIGINT).
//   * write TEXT PRIMARY KEY columns NOT NULL (SQLite otherwise allows NULL keys).
//   * where the dialects differ (upserts, DDL details), a migration may carry
//     per-engine SQL (migrate.hpp) or the caller branches on kind().
// Statements are prepared once per connection and cached (up to 256 distinct
// SQL strings; beyond that the cache is dropped and refilled).
//
// Errors: lost connection, busy/locked beyond the timeout, I/O -> unavailable;
// unique/primary key -> already_exists; NOT NULL, CHECK, FOREIGN KEY, trigger
// refusals (append-only) and other constraints -> invalid_argument; syntax or
// unknown table/column, wrong parameter count -> invalid_argument; serialization
// failure or deadlock -> conflict; damaged file -> corruption. Messages carry the
// database's own text.
//
// Related: with_read_transaction (readers never wait for writers),
// transaction::nested (savepoints), group_commit.hpp (many threads' small
// transactions share one fsync), versioned.hpp (optimistic versioning),
// migrate.hpp (schemas, append-only tables).
//
// Threads: a database (one connection) is used by one thread at a time; open one
// per thread for concurrency. Processes may share a database freely.
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/value.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace loom::store {

enum class backend { sqlite, postgres };
std::string_view to_string(backend b);  // "sqlite" / "postgres"

namespace detail {
class connection;  // engine-specific; connection.hpp (private)
}

// The handle given to a with_transaction callback. Valid only during the
// callback. After a statement fails the transaction is doomed: later statements
// return that first error and with_transaction rolls back.
class transaction {
 public:
  transaction(const transaction&) = delete;
  transaction& operator=(const transaction&) = delete;

  backend kind() const;

  // Runs one statement and returns its rows (also for INSERT … RETURNING).
  result<std::vector<row>> query(std::string_view sql, std::initializer_list<value> params = {});
  result<std::vector<row>> query(std::string_view sql, std::span<const value> params);
  // Runs one statement; returns the rows it inserted, updated or deleted (0 for DDL).
  result<std::int64_t> exec(std::string_view sql, std::initializer_list<value> params = {});
  result<std::int64_t> exec(std::string_view sql, std::span<const value> params);
  // Runs several ';'-separated statements without parameters (migrations).
  status exec_script(std::string_view sql);

  // Runs fn(*this) inside a SAVEPOINT. When fn fails (an error, a failed
  // statement, or an exception -> internal) only its own changes are undone and
  // the transaction goes on; the error is returned. Nests.
  template <class F>
  auto nested(F&& fn) -> std::invoke_result_t<F&, transaction&>;

 private:
  friend class database;
  explicit transaction(detail::connection& c) : conn_(c) {}
  status check_usable();
  template <class T>
  result<T> note(result<T> r);
  status run_nested(const std::function<status(transaction&)>& fn);

  detail::connection& conn_;
  std::optional<error> failed_;  // the first failure; the transaction is doomed
  int depth_ = 0;                // savepoints open
};

class database {
 public:
  // "postgresql://…" or "postgres://…" -> PostgreSQL (libpq URI; a
  // connect_timeout of 5 s is added unless given, so a black-holed host cannot
  // stall start-up for minutes); anything else is an SQLite file path (created if
  // missing; its directory must exist). Unreachable -> unavailable, naming the
  // URL with its password masked.
  static result<std::unique_ptr<database>> open(const std::string& url_or_path);

  // open(), retried with exponential backoff (100 ms doubling to 2 s) while the
  // answer is unavailable and `deadline` has not passed. Other errors (bad
  // password, damaged file) return at once. The last error says how many tries.
  static result<std::unique_ptr<database>> open_with_retry(const std::string& url_or_path,
                                                           std::chrono::steady_clock::time_point deadline);

  ~database();
  database(const database&) = delete;
  database& operator=(const database&) = delete;

  backend kind() const;
  const std::string& masked_url() const { return masked_url_; }

  // Whether this database's write transactions obey the process's write
  // fence (lease.hpp), when one is installed: true by default; the lease's
  // own connection sets false.
  void set_fenced(bool on) { fenced_ = on; }
  bool fenced() const { return fenced_; }

  // Begins a transaction, runs fn(tx) -> result<T>, commits. Rolls back and
  // returns the error when fn fails, a statement failed, or fn throws (then
  // errc::internal with the exception's text). When the connection is lost
  // (PostgreSQL: server restart, pg_terminate_backend) the in-flight work is
  // rolled back by the server and answered errc::unavailable; the database
  // reconnects once at once and again at the next call if needed. A lost
  // connection found at BEGIN, before fn ran, is reconnected transparently.
  // REQUIRES: not called from inside another with_transaction on this database.
  template <class F>
  auto with_transaction(F&& fn) -> std::invoke_result_t<F&, transaction&>;

  // The same for work that only reads: it never waits for writers (SQLite
  // WAL snapshot, PostgreSQL READ ONLY) and a write in it is invalid_argument.
  // Use it for the read half of read-decide-update_versioned loops.
  template <class F>
  auto with_read_transaction(F&& fn) -> std::invoke_result_t<F&, transaction&>;

 private:
  database(std::unique_ptr<detail::connection> c, std::string masked_url);
  template <class F>
  auto run(F& fn, bool read_only) -> std::invoke_result_t<F&, transaction&>;
  status run_transaction(const std::function<status(transaction&)>& fn, bool read_only);

  std::unique_ptr<detail::connection> conn_;
  std::string masked_url_;
  bool in_transaction_ = false;
  bool fenced_ = true;
};

// "postgresql://user:***@host:port/db" — the password (and any password=
// query parameter) replaced by ***; other text returned unchanged.
std::string mask_url(std::string_view url);
bool is_postgres_url(std::string_view url);

template <class F>
auto transaction::nested(F&& fn) -> std::invoke_result_t<F&, transaction&> {
  using R = std::invoke_result_t<F&, transaction&>;
  std::optional<R> out;
  status s = run_nested([&](transaction& tx) -> status {
    out.emplace(fn(tx));
    if (!out->ok()) return out->err();
    return ok_status();
  });
  if (!s.ok()) return s.err();
  return std::move(*out);
}

template <class F>
auto database::run(F& fn, bool read_only) -> std::invoke_result_t<F&, transaction&> {
  using R = std::invoke_result_t<F&, transaction&>;
  std::optional<R> out;
  status s = run_transaction(
      [&](transaction& tx) -> status {
        out.emplace(fn(tx));
        if (!out->ok()) return out->err();
        return ok_status();
      },
      read_only);
  if (!s.ok()) return s.err();
  return std::move(*out);
}

template <class F>
auto database::with_transaction(F&& fn) -> std::invoke_result_t<F&, transaction&> {
  return run(fn, false);
}

template <class F>
auto database::with_read_transaction(F&& fn) -> std::invoke_result_t<F&, transaction&> {
  return run(fn, true);
}

}  // namespace loom::store
