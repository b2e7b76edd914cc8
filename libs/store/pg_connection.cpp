// PostgreSQL engine over libpqxx 6.4 (STACK.md §3). Every pqxx exception is
// caught here and becomes loom::errc; a lost link sets broken() so database
// can answer unavailable and reconnect. Parameters travel as text (NULL as a
// null pointer; blobs in bytea hex form "\x…", which the server decodes because
// it infers the bytea type from the column), so one code path serves every
// value kind. Statements are prepared on first use, named s1, s2, …
#include "libs/store/connection.hpp"

#include <pqxx/pqxx>

#include <charconv>
#include <cmath>
#include <optional>
#include <unordered_map>

namespace loom::store::detail {
namespace {

constexpr std::size_t max_cached_statements = 256;  // as in sqlite_connection.cpp
// Type OIDs (pg_type.dat): fixed since PostgreSQL 7.
constexpr pqxx::oid oid_bool = 16, oid_bytea = 17, oid_int8 = 20, oid_int2 = 21, oid_int4 = 23,
                    oid_oid = 26, oid_float4 = 700, oid_float8 = 701, oid_numeric = 1700;

// Notices ("table exists, skipping") are informational; keep them off stderr.
class quiet_notices final : public pqxx::errorhandler {
 public:
  using pqxx::errorhandler::errorhandler;
  bool operator()(const char*) noexcept override { return false; }
};

errc code_for_sqlstate(const std::string& s) {
  if (s == "23505") return errc::already_exists;
  if (s.starts_with("23")) return errc::invalid_argument;  // NOT NULL, FK, CHECK, append-only trigger
  if (s == "40001" || s == "40P01") return errc::conflict;
  if (s == "25006") return errc::invalid_argument;  // a write in a READ ONLY transaction
  if (s.starts_with("42") || s.starts_with("22") || s == "08P01") return errc::invalid_argument;
  if (s.starts_with("08") || s.starts_with("57P")) return errc::unavailable;
  if (s.starts_with("53")) return errc::resource_exhausted;
  if (s == "57014") return errc::deadline_exceeded;
  if (s.starts_with("XX0")) return errc::corruption;
  return errc::internal;
}

std::string to_text(const value& v) {
  switch (v.index()) {
    case 0: return std::string();  // sent as a null pointer
    case 1: return std::to_string(std::get<1>(v));
    case 2: {
      double d = std::get<2>(v);
      if (std::isnan(d)) return "NaN";
      if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
      char buf[32];
      auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
      return std::string(buf, end);
    }
    case 3: return std::get<3>(v);
    default: {
      static const char* digits = "0123456789abcdef";
      const auto& b = std::get<4>(v).bytes;
      std::string out = "\\x";
      out.reserve(2 + 2 * b.size());
      for (unsigned char c : b) {
        out += digits[c >> 4];
        out += digits[c & 15];
      }
      return out;
    }
  }
}

value from_field(const pqxx::field& f, pqxx::oid type) {
  if (f.is_null()) return null;
  std::string_view t(f.c_str(), f.size());
  switch (type) {
    case oid_bool: return std::int64_t{t == "t" ? 1 : 0};
    case oid_int2:
    case oid_int4:
    case oid_int8:
    case oid_oid:
    case oid_numeric: {
      std::int64_t i = 0;
      auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), i);
      if (ec == std::errc() && end == t.data() + t.size()) return i;
      [[fallthrough]];  // a fractional or huge NUMERIC: double
    }
    case oid_float4:
    case oid_float8: {
      if (t == "NaN") return std::nan("");
      if (t == "Infinity") return HUGE_VAL;
      if (t == "-Infinity") return -HUGE_VAL;
      double d = 0;
      std::from_chars(t.data(), t.data() + t.size(), d);
      return d;
    }
    case oid_bytea: {
      pqxx::binarystring b(f);
      return blob{std::string(reinterpret_cast<const char*>(b.data()), b.size())};
    }
    default: return std::string(t);
  }
}

class pg_connection final : public connection {
 public:
  pg_connection(std::string url, std::string masked) : url_(std::move(url)), masked_(std::move(masked)) {}
  ~pg_connection() override { drop_work(); }

  status connect() {
    try {
      conn_ = std::make_unique<pqxx::connection>(url_);
      notices_ = std::make_unique<quiet_notices>(*conn_);
      return ok_status();
    } catch (const std::exception& e) {
      conn_.reset();
      std::string m = e.what();
      while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
      // A wrong password, CA or TLS setting will not fix itself: no point retrying it.
      const auto [code, hint] = explain_connect_error(m);
      return make_error(code, "cannot connect to " + masked_ + ": " + m + hint);
    }
  }

  backend kind() const override { return backend::postgres; }
  bool broken() const override { return broken_ || !conn_; }

  status reconnect() override {
    drop_connection();
    broken_ = false;
    return connect();
  }

  status begin(bool read_only) override {
    // Retry once: a link that died while idle is found here, before any work.
    for (int attempt = 0;; ++attempt) {
      if (!conn_) {
        if (auto s = reconnect(); !s.ok()) return s;
      }
      if (cache_.size() >= max_cached_statements) drop_cache();
      try {
        if (read_only) {
          work_ = std::make_unique<pqxx::read_transaction>(*conn_);
        } else {
          work_ = std::make_unique<pqxx::work>(*conn_);
        }
        return ok_status();
      } catch (...) {
        error e = translate("BEGIN");
        if (!broken_ || attempt > 0) return e;
        drop_connection();
      }
    }
  }

  status commit() override {
    try {
      work_->commit();
      work_.reset();
      return ok_status();
    } catch (...) {
      error e = translate("COMMIT");
      drop_work();
      return e;
    }
  }

  void rollback() noexcept override { drop_work(); }

  result<std::vector<row>> query(std::string_view sql, std::span<const value> params) override {
    auto r = run(sql, params);
    if (!r.ok()) return r.err();
    try {
      const pqxx::result& res = *r;
      const auto ncol = res.columns();
      auto names = std::make_shared<std::vector<std::string>>();
      std::vector<pqxx::oid> types;
      for (pqxx::row_size_type i = 0; i < ncol; ++i) {
        names->emplace_back(res.column_name(i));
        types.push_back(res.column_type(i));
      }
      std::vector<row> rows;
      rows.reserve(res.size());
      for (const auto& pr : res) {
        std::vector<value> vals;
        vals.reserve(ncol);
        for (pqxx::row_size_type i = 0; i < ncol; ++i) vals.push_back(from_field(pr[i], types[i]));
        rows.emplace_back(names, std::move(vals));
      }
      return rows;
    } catch (...) {
      return translate(sql);
    }
  }

  result<std::int64_t> exec(std::string_view sql, std::span<const value> params) override {
    auto r = run(sql, params);
    if (!r.ok()) return r.err();
    return static_cast<std::int64_t>(r->affected_rows());
  }

  status exec_script(std::string_view sql) override {
    try {
      work_->exec(std::string(sql));
      return ok_status();
    } catch (...) {
      return translate(sql);
    }
  }

  status exec_control(const std::string& sql) override { return exec_script(sql); }

 private:
  result<pqxx::result> run(std::string_view sql, std::span<const value> params) {
    // Checked here: the server answers a wrong count with a protocol error that
    // libpqxx reports as a broken connection.
    if (int n = highest_placeholder(sql); static_cast<std::size_t>(n) != params.size()) {
      return make_error(errc::invalid_argument, "statement uses $1..$" + std::to_string(n) + " but " +
                                                    std::to_string(params.size()) + " parameters were given [" +
                                                    sql_excerpt(sql) + "]");
    }
    try {
      const std::string& name = prepared(sql);
      std::vector<std::string> texts;
      texts.reserve(params.size());
      std::vector<const char*> ptrs;
      ptrs.reserve(params.size());
      for (const auto& v : params) texts.push_back(to_text(v));
      for (std::size_t i = 0; i < params.size(); ++i) {
        ptrs.push_back(params[i].index() == 0 ? nullptr : texts[i].c_str());
      }
      return work_->exec_prepared(name, pqxx::prepare::make_dynamic_params(ptrs));
    } catch (...) {
      return translate(sql);
    }
  }

  // Throws what conn.prepare throws; the caller translates.
  const std::string& prepared(std::string_view sql) {
    std::string key(sql);
    if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    std::string name = "s" + std::to_string(++statement_seq_);
    conn_->prepare(name, key);
    return cache_.emplace(std::move(key), std::move(name)).first->second;
  }

  // Turns the exception being handled into an error; notes a lost link.
  error translate(std::string_view sql) {
    std::string where = " [" + sql_excerpt(sql) + "]";
    try {
      throw;
    } catch (const pqxx::in_doubt_error& e) {
      broken_ = true;
      return make_error(errc::unavailable, "postgres " + masked_ + ": connection lost during COMMIT: " +
                                               trim(e.what()));
    } catch (const pqxx::broken_connection& e) {
      broken_ = true;
      return make_error(errc::unavailable, "postgres " + masked_ + ": connection lost: " + trim(e.what()) + where);
    } catch (const pqxx::sql_error& e) {
      const std::string state = e.sqlstate();
      if ((state.starts_with("08") && state != "08P01") || state.starts_with("57P") ||
          (conn_ && !conn_->is_open())) {
        broken_ = true;
      }
      return make_error(code_for_sqlstate(state),
                        "postgres: " + trim(e.what()) + " (SQLSTATE " + state + ")" + where);
    } catch (const pqxx::usage_error& e) {
      return make_error(errc::invalid_argument, "postgres: " + trim(e.what()) + where);
    } catch (const pqxx::conversion_error& e) {
      return make_error(errc::invalid_argument, "postgres: " + trim(e.what()) + where);
    } catch (const std::exception& e) {
      if (conn_ && !conn_->is_open()) broken_ = true;
      return make_error(broken_ ? errc::unavailable : errc::internal, "postgres: " + trim(e.what()) + where);
    } catch (...) {
      return make_error(errc::internal, "postgres: unknown exception" + where);
    }
  }

  static std::string trim(std::string m) {
    while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
    return m;
  }

  void drop_work() noexcept {
    try {
      if (work_) work_->abort();
    } catch (...) {
      // the server rolls back on its own when the link is gone
    }
    work_.reset();
  }

  void drop_connection() noexcept {
    drop_work();
    notices_.reset();  // unregisters from conn_: must go first
    conn_.reset();
    cache_.clear();
  }

  void drop_cache() {
    for (auto& [sql, name] : cache_) {
      try {
        conn_->unprepare(name);
      } catch (...) {
        // a statement the server no longer knows is as good as dropped
      }
    }
    cache_.clear();
  }

  std::string url_, masked_;
  std::unique_ptr<pqxx::connection> conn_;
  std::unique_ptr<quiet_notices> notices_;  // must die before conn_
  std::unique_ptr<pqxx::transaction_base> work_;
  std::unordered_map<std::string, std::string> cache_;  // SQL -> statement name
  std::uint64_t statement_seq_ = 0;
  bool broken_ = false;
};

}  // namespace

std::string with_connect_defaults(const std::string& url) {
  std::string out = url;
  auto add = [&](const std::string& kv) { out += (out.find('?') == std::string::npos ? "?" : "&") + kv; };
  // The value of query parameter `key` (a name inside another's value is not one); nullopt when absent.
  auto param = [&](const std::string& key) -> std::optional<std::string> {
    for (std::size_t at = out.find(key + "="); at != std::string::npos; at = out.find(key + "=", at + 1))
      if (at > 0 && (out[at - 1] == '?' || out[at - 1] == '&')) {
        const std::size_t from = at + key.size() + 1;
        return out.substr(from, out.find('&', from) - from);
      }
    return std::nullopt;
  };
  // 5 s: loopback or LAN connects in milliseconds; a dead host should fail fast
  // so open_with_retry can try again.
  if (!param("connect_timeout")) add("connect_timeout=5");
  // TLS, when the URL asks for it (sslmode require, verify-ca, verify-full), is
  // TLS 1.3 unless the URL names another minimum: no downgrade to 1.2 by a
  // middlebox or an old server.
  const auto mode = param("sslmode");
  const bool tls = mode && (*mode == "require" || *mode == "verify-ca" || *mode == "verify-full");
  if (tls && !param("ssl_min_protocol_version")) add("ssl_min_protocol_version=TLSv1.3");
  return out;
}

std::pair<errc, std::string> explain_connect_error(const std::string& m) {
  auto has = [&](const char* s) { return m.find(s) != std::string::npos; };
  if (has("authentication failed")) return {errc::unauthenticated, ""};
  if (has("no encryption"))
    return {errc::unauthenticated,
            " (the server takes only TLS connections: add sslmode=verify-full&sslrootcert=/path/to/ca.crt to the URL)"};
  if (has("certificate verify failed"))
    return {errc::unauthenticated,
            " (the server's certificate does not verify against the URL's sslrootcert: a wrong CA, or a server that "
            "is not the one named)"};
  if (has("does not match host name") || has("server certificate for"))
    return {errc::unauthenticated, " (the server's certificate names another host: connect by a name it carries)"};
  if (has("protocol version") || has("unsupported protocol"))
    return {errc::unauthenticated,
            " (no TLS version both sides take: EdgeLoom asks for TLS 1.3 at least; a server limited to 1.2 must be "
            "upgraded, or the URL must name ssl_min_protocol_version)"};
  if (has("root certificate file") || has("could not read root certificate"))
    return {errc::invalid_argument, ""};
  if (has("server does not support SSL"))
    return {errc::unauthenticated, " (the URL asks for TLS and the server has it off)"};
  return {errc::unavailable, ""};
}

result<std::unique_ptr<connection>> open_postgres(const std::string& url, const std::string& masked) {
  auto c = std::make_unique<pg_connection>(with_connect_defaults(url), masked);
  if (auto s = c->connect(); !s.ok()) return s.err();
  return std::unique_ptr<connection>(std::move(c));
}

}  // namespace loom::store::detail
