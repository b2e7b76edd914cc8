// Moving the audit chain's oldest records to archive files (issue 32 item 5;
// `loom audit archive`). What may go: a run of seqs from the first live row
// up to a signed checkpoint, every row of it older than `older_than` by the
// service's clock, never the newest row, at most max_rows per call. The run
// is verified (links, hashes, the closing checkpoint) before anything is
// written; then the file is written (libs/auditchain/archive.hpp: temporary
// name, fsync, rename) and one transaction lists it in audit_archives, keeps
// each source's highest source_seq of it in audit_archive_sources (the
// watermarks) and deletes its rows. The store's triggers (schema.cpp v4) refuse the delete
// of any row younger than 180 days by the database's clock, unarchived, or
// the newest — whatever this code or its clock decided; on a refusal nothing
// is deleted and the file is removed again.
#pragma once

#include "libs/auditchain/archive.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

namespace loom::store {
class database;
class transaction;
}  // namespace loom::store

namespace loom::audit_service {

struct archive_request {
  std::chrono::days older_than{180};  // the caller checks it against the retention
  bool dry_run = false;               // say what would go, write and delete nothing
  std::uint64_t max_rows = 1'000'000; // one call's segment at most (memory: the rows are held once)
};

struct archive_outcome {
  auditchain::archive_entry entry;  // rows == 0: nothing went
  std::string why_none;             // when nothing went: why (no old sealed segment, …)
  std::uint64_t live_first = 0;     // the first live seq after the call
  bool dry_run = false;
};

// Each source's highest source_seq among archived records
// (audit_archive_sources; none before the audit service's v4): the
// watermarks the live table no longer shows.
result<std::map<std::string, std::uint64_t>> archived_watermarks(store::transaction& tx);

// `dir`: layout::paths::audit_archive(); `now`: the service's clock.
result<archive_outcome> archive_old(store::database& db, const std::string& dir, const archive_request& req,
                                    auditchain::sys_time now);

}  // namespace loom::audit_service
