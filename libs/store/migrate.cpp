#include "libs/store/migrate.hpp"

#include "libs/crypto/hash.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/store/identifier.hpp"

#include <chrono>
#include <map>
#include <utility>

namespace loom::store {
namespace {

// Advisory lock key ("loom" in ASCII) held by every migrating transaction on
// PostgreSQL, so concurrent start-ups apply each migration exactly once.
constexpr std::int64_t migration_lock_key = 0x6c6f6f6d;

constexpr std::string_view bookkeeping_sql =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    " owner TEXT NOT NULL,"
    " version BIGINT NOT NULL,"
    " description TEXT NOT NULL,"
    " checksum TEXT NOT NULL,"
    " applied_at BIGINT NOT NULL,"
    " PRIMARY KEY (owner, version))";

// One trigger function for every append-only table (PostgreSQL); SQLite's
// triggers carry their message inline.
constexpr std::string_view pg_refuse_function =
    "CREATE OR REPLACE FUNCTION loom_refuse_append_only() RETURNS trigger LANGUAGE plpgsql AS $$\n"
    "BEGIN\n"
    "  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';\n"
    "END $$;\n";

std::string append_only_sql(backend b, const std::string& t) {
  if (b == backend::sqlite) {
    std::string out;
    for (const char* op : {"UPDATE", "DELETE"}) {
      std::string lower = op[0] == 'U' ? "update" : "delete";
      out += "CREATE TRIGGER " + t + "_append_only_" + lower + " BEFORE " + op + " ON " + t +
             " BEGIN SELECT RAISE(ABORT, '" + t + " is append-only'); END;\n";
    }
    return out;
  }
  return std::string(pg_refuse_function) + "CREATE TRIGGER " + t + "_append_only BEFORE UPDATE OR DELETE ON " +
         t + " FOR EACH ROW EXECUTE FUNCTION loom_refuse_append_only();\n" + "CREATE TRIGGER " + t +
         "_append_only_truncate BEFORE TRUNCATE ON " + t +
         " FOR EACH STATEMENT EXECUTE FUNCTION loom_refuse_append_only();\n";
}

status lock(transaction& tx) {
  if (tx.kind() != backend::postgres) return ok_status();  // BEGIN IMMEDIATE already serialises
  auto r = tx.query("SELECT pg_advisory_xact_lock(CAST($1 AS BIGINT))", {migration_lock_key});
  return r.ok() ? ok_status() : status(r.err());
}

std::string name(const migration& m) { return "'" + m.owner + "' v" + std::to_string(m.version); }

status validate(std::span<const migration> ms) {
  std::map<std::string, int> last;
  for (const auto& m : ms) {
    if (!is_identifier(m.owner)) {
      return make_error(errc::invalid_argument, "migration owner '" + m.owner + "' is not a plain name");
    }
    int want = last[m.owner] + 1;
    if (m.version != want) {
      return make_error(errc::invalid_argument, "migrations for '" + m.owner + "' must be numbered 1, 2, … in order: "
                                                "expected version " + std::to_string(want) + ", found " +
                                                std::to_string(m.version));
    }
    last[m.owner] = m.version;
    for (const auto& t : m.append_only_tables) {
      if (!is_identifier(t)) {
        return make_error(errc::invalid_argument, "migration " + name(m) + ": append-only table '" + t +
                                                      "' is not a plain name");
      }
    }
  }
  return ok_status();
}

status check_recorded(const migration& m, const std::string& recorded) {
  if (recorded == checksum(m)) return ok_status();
  return make_error(errc::corruption, "schema migration " + name(m) + " (" + m.description +
                                          ") was recorded with checksum " + recorded.substr(0, 12) +
                                          "… but this binary's is " + checksum(m).substr(0, 12) +
                                          "…: a released migration was edited; add a new version instead");
}

status apply(database& db, const migration& m) {
  return db.with_transaction([&](transaction& tx) -> status {
    if (auto s = lock(tx); !s.ok()) return s;
    // Another process may have applied it since we looked.
    auto seen = tx.query("SELECT checksum FROM schema_migrations WHERE owner = $1 AND version = $2",
                         {m.owner, std::int64_t{m.version}});
    if (!seen.ok()) return seen.err();
    if (!seen->empty()) {
      auto sum = (*seen)[0].get_text(0);
      return sum.ok() ? check_recorded(m, *sum) : status(sum.err());
    }
    const std::string& own = tx.kind() == backend::sqlite ? m.sql_sqlite : m.sql_postgres;
    std::string sql = own.empty() ? m.sql : own;
    // The caller's last statement may lack its ';': end it before the triggers.
    auto last = sql.find_last_not_of(" \t\r\n");
    if (!m.append_only_tables.empty() && last != std::string::npos && sql[last] != ';') sql += ";";
    for (const auto& t : m.append_only_tables) sql += "\n" + append_only_sql(tx.kind(), t);
    if (auto s = tx.exec_script(sql); !s.ok()) {
      return make_error(s.code(), "schema migration " + name(m) + " (" + m.description + "): " + s.err().message);
    }
    auto rec = tx.exec(
        "INSERT INTO schema_migrations (owner, version, description, checksum, applied_at) "
        "VALUES ($1, $2, $3, $4, $5)",
        {m.owner, std::int64_t{m.version}, m.description, checksum(m), unix_now_ns()});
    return rec.ok() ? ok_status() : status(rec.err());
  });
}

}  // namespace

std::string checksum(const migration& m) {
  // Length-prefixed fields: moving text from one field to the next changes the sum.
  std::string in;
  auto field = [&](const std::string& s) { in += std::to_string(s.size()) + ":" + s + ";"; };
  field(m.sql);
  field(m.sql_sqlite);
  field(m.sql_postgres);
  for (const auto& t : m.append_only_tables) field(t);
  return crypto::sha256_hex(in);
}

status migrate(database& db, std::span<const migration> ms) {
  if (auto s = validate(ms); !s.ok()) return s;
  auto made = db.with_transaction([&](transaction& tx) -> status {
    if (auto s = lock(tx); !s.ok()) return s;
    return tx.exec_script(bookkeeping_sql);
  });
  if (!made.ok()) return made;

  using key = std::pair<std::string, std::int64_t>;
  auto recorded = db.with_transaction([&](transaction& tx) -> result<std::map<key, std::string>> {
    auto rows = tx.query("SELECT owner, version, checksum FROM schema_migrations");
    if (!rows.ok()) return rows.err();
    std::map<key, std::string> out;
    for (const auto& r : *rows) {
      auto owner = r.get_text(0), sum = r.get_text(2);
      auto version = r.get_i64(1);
      if (!owner.ok() || !version.ok() || !sum.ok()) {
        return make_error(errc::corruption, "schema_migrations holds a malformed row");
      }
      out.emplace(key{*owner, *version}, *sum);
    }
    return out;
  });
  if (!recorded.ok()) return recorded.err();

  // Refuse before changing anything.
  std::map<std::string, int> known;
  for (const auto& m : ms) known[m.owner] = m.version;
  for (const auto& [k, sum] : *recorded) {
    auto it = known.find(k.first);
    if (it != known.end() && k.second > it->second) {
      std::int64_t newest = k.second;
      for (const auto& [k2, s2] : *recorded) {
        if (k2.first == k.first) newest = std::max(newest, k2.second);
      }
      return make_error(errc::invalid_argument, "database schema for '" + k.first + "' is at version " +
                                                    std::to_string(newest) + " but this binary knows only up to " +
                                                    std::to_string(it->second) + ": upgrade loom");
    }
  }
  for (const auto& m : ms) {
    auto it = recorded->find(key{m.owner, m.version});
    if (it != recorded->end()) {
      if (auto s = check_recorded(m, it->second); !s.ok()) return s;
    }
  }
  for (const auto& m : ms) {
    if (recorded->count(key{m.owner, m.version}) != 0) continue;
    if (auto s = apply(db, m); !s.ok()) return s;
  }
  return ok_status();
}

}  // namespace loom::store
