#include "libs/store/database.hpp"

#include "libs/retry/backoff.hpp"

#include "libs/store/connection.hpp"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <thread>

namespace loom::store {

std::string_view to_string(backend b) { return b == backend::sqlite ? "sqlite" : "postgres"; }

// ---------------------------------------------------------------- transaction

backend transaction::kind() const { return conn_.kind(); }

status transaction::check_usable() {
  if (!failed_) return ok_status();
  return make_error(failed_->code, "transaction already failed: " + failed_->message);
}

template <class T>
result<T> transaction::note(result<T> r) {
  if (!r.ok() && !failed_) failed_ = r.err();
  return r;
}

result<std::vector<row>> transaction::query(std::string_view sql, std::initializer_list<value> params) {
  return query(sql, std::span<const value>(params.begin(), params.size()));
}

result<std::vector<row>> transaction::query(std::string_view sql, std::span<const value> params) {
  if (auto s = check_usable(); !s.ok()) return s.err();
  return note(conn_.query(sql, params));
}

result<std::int64_t> transaction::exec(std::string_view sql, std::initializer_list<value> params) {
  return exec(sql, std::span<const value>(params.begin(), params.size()));
}

result<std::int64_t> transaction::exec(std::string_view sql, std::span<const value> params) {
  if (auto s = check_usable(); !s.ok()) return s.err();
  return note(conn_.exec(sql, params));
}

status transaction::exec_script(std::string_view sql) {
  if (auto s = check_usable(); !s.ok()) return s;
  return note(conn_.exec_script(sql));
}

status transaction::run_nested(const std::function<status(transaction&)>& fn) {
  if (auto s = check_usable(); !s.ok()) return s;
  const std::string sp = "loom_nested_" + std::to_string(depth_);
  if (auto s = note(conn_.exec_control("SAVEPOINT " + sp)); !s.ok()) return s;
  ++depth_;
  status outcome;
  try {
    outcome = fn(*this);
  } catch (const std::exception& e) {
    outcome = make_error(errc::internal, std::string("nested work aborted by an exception: ") + e.what());
  } catch (...) {
    outcome = make_error(errc::internal, "nested work aborted by an unknown exception");
  }
  --depth_;
  if (outcome.ok() && failed_) outcome = *failed_;
  if (outcome.ok()) return note(conn_.exec_control("RELEASE SAVEPOINT " + sp));
  // Undo fn's work only; the transaction is usable again unless that fails too.
  failed_.reset();
  (void)note(conn_.exec_control("ROLLBACK TO SAVEPOINT " + sp + "; RELEASE SAVEPOINT " + sp));
  return outcome;
}

// ---------------------------------------------------------------- database

database::database(std::unique_ptr<detail::connection> c, std::string masked_url)
    : conn_(std::move(c)), masked_url_(std::move(masked_url)) {}

database::~database() = default;

backend database::kind() const { return conn_->kind(); }

result<std::unique_ptr<database>> database::open(const std::string& url_or_path) {
  if (url_or_path.empty()) return make_error(errc::invalid_argument, "empty database URL or path");
  std::string masked = mask_url(url_or_path);
  auto c = is_postgres_url(url_or_path) ? detail::open_postgres(url_or_path, masked)
                                        : detail::open_sqlite(url_or_path);
  if (!c.ok()) return c.err();
  return std::unique_ptr<database>(new database(std::move(*c), std::move(masked)));
}

result<std::unique_ptr<database>> database::open_with_retry(const std::string& url_or_path,
                                                           std::chrono::steady_clock::time_point deadline) {
  // 100 ms first: a server that is starting needs ~1-2 s; 2 s cap: retry
  // often enough to start soon after it is up.
  retry::backoff delay(std::chrono::milliseconds(100), std::chrono::milliseconds(2000));
  for (int attempt = 1;; ++attempt) {
    auto db = open(url_or_path);
    if (db.ok() || db.code() != errc::unavailable) return db;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      return make_error(errc::unavailable, db.err().message + " (gave up after " + std::to_string(attempt) +
                                               (attempt == 1 ? " attempt)" : " attempts)"));
    }
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(delay.next(), deadline - now));
  }
}

status database::run_transaction(const std::function<status(transaction&)>& fn, bool read_only) {
  if (in_transaction_) {
    return make_error(errc::invalid_argument, "with_transaction called inside another on the same database");
  }
  in_transaction_ = true;
  struct reset {
    bool& flag;
    ~reset() { flag = false; }
  } guard{in_transaction_};

  if (conn_->broken()) {
    if (auto r = conn_->reconnect(); !r.ok()) return r;
  }
  if (auto b = conn_->begin(read_only); !b.ok()) return b;

  transaction tx(*conn_);
  status outcome;
  try {
    if (!read_only && fenced_) outcome = detail::check_write_fence(*conn_);
    if (outcome.ok()) outcome = fn(tx);
  } catch (const std::exception& e) {
    outcome = make_error(errc::internal, std::string("transaction aborted by an exception: ") + e.what());
  } catch (...) {
    outcome = make_error(errc::internal, "transaction aborted by an unknown exception");
  }
  if (outcome.ok() && tx.failed_) outcome = *tx.failed_;
  if (outcome.ok()) outcome = conn_->commit();

  if (conn_->broken()) {
    // The server ends a transaction whose connection died: nothing of it is kept
    // (a COMMIT lost in flight is reported as such by the engine's message).
    conn_->rollback();
    std::string msg = "connection to " + masked_url_ + " lost; the transaction was not committed (" +
                      (outcome.ok() ? std::string("no detail") : outcome.err().message) + ")";
    if (auto r = conn_->reconnect(); r.ok()) {
      msg += "; reconnected";
    } else {
      msg += "; reconnect failed, will retry at the next transaction";
    }
    return make_error(errc::unavailable, msg);
  }
  if (!outcome.ok()) conn_->rollback();
  return outcome;
}

// ---------------------------------------------------------------- URLs

bool is_postgres_url(std::string_view url) {
  return url.starts_with("postgresql://") || url.starts_with("postgres://");
}

std::string mask_url(std::string_view url) {
  std::string out(url);
  auto scheme = out.find("://");
  if (scheme != std::string::npos) {
    auto start = scheme + 3;
    auto end = out.find_first_of("/?#", start);
    if (end == std::string::npos) end = out.size();
    auto at = out.rfind('@', end);
    if (at != std::string::npos && at >= start) {
      auto colon = out.find(':', start);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  // libpq also accepts ?password=… (and &password=…).
  for (std::size_t pos = 0; (pos = out.find("password=", pos)) != std::string::npos;) {
    bool param = pos > 0 && (out[pos - 1] == '?' || out[pos - 1] == '&');
    pos += 9;
    if (!param) continue;
    auto end = out.find('&', pos);
    if (end == std::string::npos) end = out.size();
    out.replace(pos, end - pos, "***");
  }
  return out;
}

namespace detail {

int placeholder_number(std::string_view name) {
  if (name.size() < 2 || name[0] != '$' || name.size() > 6) return 0;
  int n = 0;
  for (char c : name.substr(1)) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

int highest_placeholder(std::string_view sql) {
  auto ident = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  };
  int highest = 0;
  std::size_t i = 0;
  auto skip_to = [&](std::string_view end) {
    auto at = sql.find(end, i);
    i = at == std::string_view::npos ? sql.size() : at + end.size();
  };
  while (i < sql.size()) {
    char c = sql[i];
    if (c == '\'' || c == '"') {  // '' and "" escape themselves: two strings back to back
      ++i;
      skip_to(std::string_view(&c, 1));
    } else if (sql.substr(i, 2) == "--") {
      skip_to("\n");
    } else if (sql.substr(i, 2) == "/*") {
      i += 2;
      skip_to("*/");
    } else if (c == '$' && i + 1 < sql.size() && sql[i + 1] >= '0' && sql[i + 1] <= '9' &&
               (i == 0 || !ident(sql[i - 1]))) {
      int n = 0;
      for (++i; i < sql.size() && sql[i] >= '0' && sql[i] <= '9'; ++i) n = std::min(n * 10 + (sql[i] - '0'), 1 << 20);
      highest = std::max(highest, n);
    } else if (c == '$' && (i == 0 || !ident(sql[i - 1]))) {
      auto close = sql.find('$', i + 1);  // $tag$ … $tag$
      std::string_view tag = close == std::string_view::npos ? "" : sql.substr(i, close - i + 1);
      bool is_tag = !tag.empty() && std::all_of(tag.begin() + 1, tag.end() - 1, ident);
      i = is_tag ? close + 1 : i + 1;
      if (is_tag) skip_to(tag);
    } else {
      ++i;
    }
  }
  return highest;
}

std::string sql_excerpt(std::string_view sql, std::size_t n) {
  std::string out;
  for (char c : sql) {
    if (out.size() >= n) {
      out += "…";
      break;
    }
    bool space = c == '\n' || c == '\t' || c == '\r' || c == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

}  // namespace detail
}  // namespace loom::store
