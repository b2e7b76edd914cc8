// The audit chain in the state store: the tables' DDL, row and checkpoint
// reads/writes, and verify_store — what `loom audit verify` calls. Rows are
// read in pages by seq in one read transaction (a consistent snapshot on
// SQLite; on PostgreSQL later pages may see newer rows, which only extends
// the walk). Checkpoints (database and anchor file) are read before the rows,
// so rows appended meanwhile never look like a truncation.
// Functions take the caller's transaction or database (one thread at a time,
// as loom::store requires).
#pragma once

#include "libs/auditchain/archive.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/row.hpp"
#include "libs/auditchain/verifier.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::store {
class database;
class transaction;
enum class backend;
}  // namespace loom::store

namespace loom::auditchain {

struct tables {
  std::string events = "audit_events";
  std::string checkpoints = "audit_checkpoints";
  std::string archives = "audit_archives";  // archived segments (archive.hpp); absent before the audit service's v4
};

// DDL for both tables; both belong in migrate.hpp's append_only_tables. The
// events table keeps the v1 columns of services/audit/schema.cpp and adds
// prev_hash and row_hash; payload holds the sealed payload and is NOT NULL;
// tenant and row_version (chain_row::version; 1 for rows stored before
// tenants, the column's default) came later (the audit service's v3).
// On SQLite seq is INTEGER PRIMARY KEY (the 64-bit rowid itself: one B-tree
// instead of table + index, which nearly doubles verification speed); on
// PostgreSQL BIGINT. A migration must carry this text literally (sql_sqlite /
// sql_postgres): a released migration never changes.
// Indexes: job_id (`loom audit trail JOB`; few distinct values, so inserts
// touch few pages), tenant (a tenant's own trail and tail; fewer still). No index on request_id, unlike v1: request ids are random
// 128-bit values, and a B-tree on them dirties one random page per event —
// measured on SQLite (bench/audit_bench): 15k events/s with it, 50k without.
// Look-ups by request id scan instead (rare: tests, operators).
std::string schema_sql(store::backend engine, const tables& t = {});

status insert_row(store::transaction& tx, const chain_row& r, const tables& t = {});
status insert_checkpoint(store::transaction& tx, const checkpoint& c, const tables& t = {});

// Rows with seq ≥ from_seq in seq order, at most `limit`. A row with a NULL or
// mistyped column is corruption naming its seq (the verifier reports those as
// `malformed` instead).
result<std::vector<chain_row>> read_rows(store::transaction& tx, std::uint64_t from_seq, std::size_t limit,
                                         const tables& t = {});
// The last row's seq and hash (0 and genesis_hash for an empty table).
result<chain_tail> read_tail(store::transaction& tx, const tables& t = {});
// Every checkpoint row, by seq.
result<std::vector<checkpoint>> read_checkpoints(store::transaction& tx, const tables& t = {});

// The archived segments listed in t.archives, by first_seq; none when the
// table does not exist (a store the audit service's v4 has not reached).
result<std::vector<archive_entry>> read_archive_entries(store::transaction& tx, const tables& t = {});
status insert_archive_entry(store::transaction& tx, const archive_entry& e, const tables& t = {});

struct verify_options {
  std::uint64_t from_seq = 1;  // start here, trusting row from_seq - 1's hash
  std::string keys_dir;        // trusted anchor-*.pub; "" or missing: none (checkpoints then fail)
  // The external anchor; "" = database checkpoints only (noted). When a
  // trusted key exists, a named file that is missing or holds no checkpoint
  // signed by a trusted key is fault::anchor_missing: every anchor key's file
  // starts with its genesis checkpoint (writer.hpp's anchor_genesis).
  std::string anchor_file;
  tables names;
  // Where the archived segments' files are (`loom audit verify --archive
  // DIR`): they are walked first, in seq order, each file's SHA-256 checked
  // against audit_archives, then the live rows continue the same chain.
  // "" = the live rows only, from the hash after the last archived segment
  // (noted; the next signed checkpoint proves that hash).
  std::string archive_dir;
  std::size_t page_rows = 1024;  // rows per SELECT: amortises the query, stays in cache (measured: 256–1024 best)
};

// Loads the keys and the anchor file, then walks the chain in one read
// transaction; a chain shorter than a checkpoint (database or file) is
// fault::truncated, a missing or empty anchor file fault::anchor_missing. Errors (result) are I/O — database unreachable, unreadable
// files — or a from_seq past the end of the log (invalid_argument). A broken
// chain is an ok result whose report is !ok().
result<verify_report> verify_store(store::database& db, const verify_options& o);

// Where the chain is stored: $LOOM_DATABASE_URL when set (PostgreSQL: one
// server for every service), else its own SQLite file <data_dir>/audit.db —
// not the services' loom.db, because SQLite has one write lock and one WAL
// per file: the audit writer's commits would queue behind the scheduler's and
// reset its page cache on every commit. A data dir written before audit.db
// existed (no audit.db, loom.db holding audit_events) keeps its chain in loom.db.
// The audit service and `loom audit verify` both ask here.
std::string store_url(const std::string& data_dir);

// The same inside the caller's transaction, with keys and external
// checkpoints already loaded (tests tamper and verify in one transaction).
result<verify_report> verify_in(store::transaction& tx, std::uint64_t from_seq, const anchor_keys& keys,
                                std::span<const checkpoint> external, const tables& names = {},
                                std::size_t page_rows = 1024, const std::string& archive_dir = {});

}  // namespace loom::auditchain
