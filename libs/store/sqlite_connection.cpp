// SQLite engine: one sqlite3 handle, statements prepared once and cached.
// Placeholders: SQLite itself parses "$1" as a named parameter, so the SQL is
// not rewritten; each "$N" is bound by name to params[N-1].
// Transactions are BEGIN IMMEDIATE: the write lock is taken up front, so two
// writers queue on busy_timeout instead of one failing with SQLITE_BUSY when it
// upgrades a read lock in the middle of its work.
#include "libs/store/connection.hpp"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <thread>
#include <unordered_map>

namespace loom::store::detail {
namespace {

// Why 5 s: long enough to queue behind any normal writer (a transaction is
// milliseconds), short enough that a stuck lock surfaces as unavailable.
constexpr auto busy_timeout = std::chrono::milliseconds(5000);
// While waiting for the write lock, poll every 100 µs doubling to 1 ms.
// sqlite3_busy_timeout's own schedule sleeps up to 100 ms at a time, so a
// writer committing every millisecond starves a waiting process for seconds.
constexpr int busy_poll_first_us = 100, busy_poll_max_us = 1000;
// Distinct SQL strings kept prepared; callers use fixed SQL, so hitting this
// means SQL built per call — then the cache starts over rather than grows.
constexpr std::size_t max_cached_statements = 256;

errc code_for(int ext) {
  switch (ext) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
    case SQLITE_CONSTRAINT_ROWID:
      return errc::already_exists;
    default: break;
  }
  switch (ext & 0xff) {
    case SQLITE_CONSTRAINT:
    case SQLITE_ERROR:
    case SQLITE_MISMATCH:
    case SQLITE_RANGE:
    case SQLITE_TOOBIG:
      return errc::invalid_argument;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return errc::corruption;
    case SQLITE_FULL:
    case SQLITE_NOMEM:
      return errc::resource_exhausted;
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return errc::permission_denied;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_PROTOCOL:
      return errc::unavailable;
    default:
      return errc::internal;
  }
}

class sqlite_connection final : public connection {
 public:
  sqlite_connection(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  ~sqlite_connection() override {
    drop_cache();
    for (auto* s : {begin_, begin_read_, commit_, rollback_}) sqlite3_finalize(s);
    sqlite3_close_v2(db_);
  }

  status init() {
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_handler(db_, &sqlite_connection::on_busy, this);
    // journal_mode answers the mode it got: anything but "wal" (e.g. a file
    // system without shared memory) is refused rather than silently slower/unsafe.
    auto mode = query("PRAGMA journal_mode=WAL", {});
    if (!mode.ok()) return mode.err();
    auto got = mode->empty() ? result<std::string>(make_error(errc::internal, "no row"))
                             : (*mode)[0].get_text(0);
    if (!got.ok() || *got != "wal") {
      return make_error(errc::unavailable, "SQLite " + path_ + ": cannot switch to WAL journal mode");
    }
    for (const char* pragma : {"PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON"}) {
      if (auto r = exec(pragma, {}); !r.ok()) return r.err();
    }
    for (auto [sql, out] : {std::pair{"BEGIN IMMEDIATE", &begin_}, std::pair{"BEGIN", &begin_read_},
                            std::pair{"COMMIT", &commit_}, std::pair{"ROLLBACK", &rollback_}}) {
      if (sqlite3_prepare_v2(db_, sql, -1, out, nullptr) != SQLITE_OK) return fail("prepare", sql);
    }
    return ok_status();
  }

  backend kind() const override { return backend::sqlite; }

  status begin(bool read_only) override {
    if (cache_.size() >= max_cached_statements) drop_cache();
    read_only_ = read_only;
    return read_only ? step_control(begin_read_, "BEGIN") : step_control(begin_, "BEGIN IMMEDIATE");
  }
  status commit() override { return step_control(commit_, "COMMIT"); }
  void rollback() noexcept override {
    if (sqlite3_get_autocommit(db_) == 0) (void)step_control(rollback_, "ROLLBACK");
  }

  result<std::vector<row>> query(std::string_view sql, std::span<const value> params) override {
    auto st = prepare_bound(sql, params);
    if (!st.ok()) return st.err();
    sqlite3_stmt* s = *st;
    const int ncol = sqlite3_column_count(s);
    auto names = std::make_shared<std::vector<std::string>>();
    for (int i = 0; i < ncol; ++i) names->emplace_back(sqlite3_column_name(s, i));
    std::vector<row> rows;
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
      std::vector<value> vals;
      vals.reserve(ncol);
      for (int i = 0; i < ncol; ++i) vals.push_back(column(s, i));
      rows.emplace_back(names, std::move(vals));
    }
    return finish(s, rc, sql, std::move(rows));
  }

  result<std::int64_t> exec(std::string_view sql, std::span<const value> params) override {
    auto st = prepare_bound(sql, params);
    if (!st.ok()) return st.err();
    sqlite3_stmt* s = *st;
    // sqlite3_changes keeps the last DML count across DDL; the total_changes
    // delta tells whether this statement changed anything at all.
    auto before = sqlite3_total_changes64(db_);
    int rc;
    while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    }
    std::int64_t n = sqlite3_total_changes64(db_) == before ? 0 : sqlite3_changes64(db_);
    return finish(s, rc, sql, n);
  }

  status exec_script(std::string_view sql) override {
    if (read_only_) return make_error(errc::invalid_argument, "a read transaction cannot run scripts");
    return exec_control(std::string(sql));
  }

  status exec_control(const std::string& text) override {
    char* msg = nullptr;
    int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &msg);
    if (rc == SQLITE_OK) return ok_status();
    std::string m = msg != nullptr ? msg : sqlite3_errstr(rc);
    sqlite3_free(msg);
    return make_error(code_for(sqlite3_extended_errcode(db_)), "sqlite " + path_ + ": " + m);
  }

 private:
  static int on_busy(void* self, int count) {
    auto* c = static_cast<sqlite_connection*>(self);
    auto now = std::chrono::steady_clock::now();
    if (count == 0) c->busy_since_ = now;
    if (now - c->busy_since_ >= busy_timeout) return 0;  // SQLITE_BUSY -> unavailable
    std::this_thread::sleep_for(std::chrono::microseconds(std::min(busy_poll_first_us << std::min(count, 4),
                                                                   busy_poll_max_us)));
    return 1;
  }

  error fail(std::string_view what, std::string_view sql) const {
    return make_error(code_for(sqlite3_extended_errcode(db_)), "sqlite " + path_ + ": " + std::string(what) +
                                                                   ": " + sqlite3_errmsg(db_) + " [" +
                                                                   sql_excerpt(sql) + "]");
  }

  status step_control(sqlite3_stmt* s, std::string_view sql) {
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc == SQLITE_DONE) return ok_status();
    return make_error(code_for(rc), "sqlite " + path_ + ": " + std::string(sql) + ": " + sqlite3_errmsg(db_));
  }

  template <class T>
  result<T> finish(sqlite3_stmt* s, int rc, std::string_view sql, T out) {
    if (rc != SQLITE_DONE) {
      error e = fail("step", sql);
      sqlite3_reset(s);
      sqlite3_clear_bindings(s);
      return e;
    }
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);  // parameters are bound SQLITE_STATIC: do not keep pointers
    return out;
  }

  result<sqlite3_stmt*> prepare_bound(std::string_view sql, std::span<const value> params) {
    auto st = prepared(sql);
    if (!st.ok()) return st;
    sqlite3_stmt* s = *st;
    if (read_only_ && sqlite3_stmt_readonly(s) == 0) {
      return make_error(errc::invalid_argument, "a read transaction cannot write [" + sql_excerpt(sql) + "]");
    }
    const int n = sqlite3_bind_parameter_count(s);
    int highest = 0;
    for (int i = 1; i <= n; ++i) {
      const char* name = sqlite3_bind_parameter_name(s, i);
      int k = name != nullptr ? placeholder_number(name) : 0;
      if (k == 0) {
        return make_error(errc::invalid_argument, "placeholders must be $1, $2, …; found " +
                                                      std::string(name != nullptr ? name : "?") + " in [" +
                                                      sql_excerpt(sql) + "]");
      }
      highest = std::max(highest, k);
      if (static_cast<std::size_t>(k) > params.size()) continue;  // reported below
      if (int rc = bind(s, i, params[k - 1]); rc != SQLITE_OK) {
        sqlite3_clear_bindings(s);
        return fail("bind $" + std::to_string(k), sql);
      }
    }
    if (static_cast<std::size_t>(highest) != params.size()) {
      sqlite3_clear_bindings(s);
      return make_error(errc::invalid_argument, "statement uses $1..$" + std::to_string(highest) + " but " +
                                                    std::to_string(params.size()) + " parameters were given [" +
                                                    sql_excerpt(sql) + "]");
    }
    return s;
  }

  static int bind(sqlite3_stmt* s, int i, const value& v) {
    switch (v.index()) {
      case 0: return sqlite3_bind_null(s, i);
      case 1: return sqlite3_bind_int64(s, i, std::get<1>(v));
      case 2: return sqlite3_bind_double(s, i, std::get<2>(v));
      case 3: {
        const auto& t = std::get<3>(v);
        return sqlite3_bind_text64(s, i, t.data(), t.size(), SQLITE_STATIC, SQLITE_UTF8);
      }
      default: {
        const auto& b = std::get<4>(v).bytes;
        // A null pointer would bind NULL, not an empty blob.
        if (b.empty()) return sqlite3_bind_zeroblob(s, i, 0);
        return sqlite3_bind_blob64(s, i, b.data(), b.size(), SQLITE_STATIC);
      }
    }
  }

  static value column(sqlite3_stmt* s, int i) {
    switch (sqlite3_column_type(s, i)) {
      case SQLITE_INTEGER: return std::int64_t{sqlite3_column_int64(s, i)};
      case SQLITE_FLOAT: return sqlite3_column_double(s, i);
      case SQLITE_TEXT: {
        const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
        return std::string(p, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
      }
      case SQLITE_BLOB: {
        const auto* p = static_cast<const char*>(sqlite3_column_blob(s, i));
        auto n = static_cast<std::size_t>(sqlite3_column_bytes(s, i));
        return blob{p != nullptr ? std::string(p, n) : std::string()};
      }
      default: return null;
    }
  }

  result<sqlite3_stmt*> prepared(std::string_view sql) {
    std::string key(sql);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    sqlite3_stmt* s = nullptr;
    const char* tail = nullptr;
    int rc = sqlite3_prepare_v3(db_, key.data(), static_cast<int>(key.size()), SQLITE_PREPARE_PERSISTENT, &s,
                                &tail);
    if (rc != SQLITE_OK) return fail("prepare", sql);
    if (s == nullptr) return make_error(errc::invalid_argument, "empty statement");
    for (; tail != nullptr && *tail != '\0'; ++tail) {
      if (*tail != ' ' && *tail != '\n' && *tail != '\t' && *tail != '\r' && *tail != ';') {
        sqlite3_finalize(s);
        return make_error(errc::invalid_argument, "one statement per call (use exec_script for several) [" +
                                                      sql_excerpt(sql) + "]");
      }
    }
    cache_.emplace(std::move(key), s);
    return s;
  }

  void drop_cache() {
    for (auto& [sql, s] : cache_) sqlite3_finalize(s);
    cache_.clear();
  }

  sqlite3* db_;
  std::string path_;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* begin_read_ = nullptr;  // deferred: a WAL snapshot, no write lock
  bool read_only_ = false;
  std::chrono::steady_clock::time_point busy_since_{};
  sqlite3_stmt* commit_ = nullptr;
  sqlite3_stmt* rollback_ = nullptr;
  std::unordered_map<std::string, sqlite3_stmt*> cache_;
};

}  // namespace

result<std::unique_ptr<connection>> open_sqlite(const std::string& path) {
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return make_error(code_for(rc), "cannot open SQLite database " + path + ": " + msg);
  }
  auto c = std::make_unique<sqlite_connection>(db, path);
  if (auto s = c->init(); !s.ok()) {
    return make_error(s.code(), "cannot open SQLite database " + path + ": " + s.err().message);
  }
  return std::unique_ptr<connection>(std::move(c));
}

}  // namespace loom::store::detail
