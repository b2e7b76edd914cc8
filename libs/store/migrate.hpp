// Schema migrations: each service owns its tables and ships them as a list of
// numbered migrations (services/<name>/schema.hpp). migrate() runs at start-up:
// it applies the versions a database lacks, in order, each in its own
// transaction, and records them in
//   schema_migrations(owner, version, description, checksum, applied_at)
// (applied_at: unix nanoseconds). Running it again applies nothing.
// It refuses, before changing anything:
//   * a database whose recorded version for an owner is newer than the binary
//     knows -> invalid_argument "database schema for 'scheduler' is at version 5
//     but this binary knows only up to 3: upgrade loom";
//   * a recorded migration whose checksum differs from the binary's (someone
//     edited a released migration) -> corruption naming owner and version.
// Several processes may migrate one database at once (PostgreSQL: an advisory
// lock serialises them; SQLite: BEGIN IMMEDIATE does).
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"

#include <span>
#include <string>
#include <vector>

namespace loom::store {

struct migration {
  std::string owner{};        // "scheduler", "audit", …: who owns these tables
  int version = 0;          // 1, 2, 3, … per owner, no gaps
  std::string description{};  // one line, recorded
  // The portable SQL (database.hpp's dialect), several statements allowed.
  // sql_sqlite / sql_postgres, when non-empty, replace it on that engine.
  std::string sql{};
  std::string sql_sqlite{};
  std::string sql_postgres{};
  // Tables this migration creates that must never be updated or deleted from:
  // triggers refusing UPDATE and DELETE (and TRUNCATE on PostgreSQL) are added
  // in the same transaction; attempts fail invalid_argument "<table> is append-only".
  std::vector<std::string> append_only_tables{};
};

// Hex SHA-256 over everything applied (all SQL variants and the append-only
// list; not the description, which may be reworded).
std::string checksum(const migration& m);

// Applies pending migrations. Within the span each owner's versions must appear
// as 1, 2, …, N; owners are migrated in the order they first appear.
status migrate(database& db, std::span<const migration> migrations);

}  // namespace loom::store
