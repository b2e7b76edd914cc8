// Archived segments of the audit chain (issue 32 item 5): rows older than
// the retention leave the live table for a file that still verifies end to
// end with it. A segment is a contiguous run of seqs [first_seq, last_seq]
// that ends at a signed checkpoint; the file holds its rows exactly as
// stored (sealed payloads, hashes) and the checkpoints inside it, and the
// store's `audit_archives` table holds one row per file: its seqs, the hash
// before and after it and the file's SHA-256 (the index `loom audit verify
// --archive DIR` walks, files in seq order, then the live rows).
//
// File format (JSON lines, UTF-8; a string field that is not valid UTF-8 is
// written as {"hex": "..."}; hashes and signatures are hex):
//   line 1   {"format":"loom.audit.archive.v1","first_seq":..,"last_seq":..,
//             "rows":..,"prev_hash":..,"last_hash":..,"oldest_ns":..,
//             "newest_ns":..,"created_ns":..}
//   then     {"row":{"seq":..,"unix_ns":..,"source":..,...,"row_hash":..}} per row, by seq
//   then     {"checkpoint":{"seq":..,"row_hash":..,"unix_ns":..,"key_id":..,"signature":..}}
// The file is written to a temporary name, fsynced and renamed (files::write_atomic).
// Pure file I/O: the store side is services/audit/archive.hpp.
#pragma once

#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/row.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace loom::auditchain {

inline constexpr const char* archive_format = "loom.audit.archive.v1";

// One audit_archives row / one file's header.
struct archive_entry {
  std::uint64_t first_seq = 0, last_seq = 0, rows = 0;
  hash32 prev_hash{};  // row hash of first_seq - 1 (genesis_hash when first_seq is 1)
  hash32 last_hash{};  // row hash of last_seq
  std::int64_t oldest_ns = 0, newest_ns = 0, created_ns = 0;
  std::string file;    // the file's name inside the archive directory
  std::string sha256;  // hex digest of the whole file
};

// "audit-00000000000000000001-00000000000000004000-<created ns>.jsonl":
// sorts by seq; the creation time makes each write's name its own, so a
// write whose listing fails (a concurrent archive of the same seqs, a
// deposed replica) removes only its own file, never a listed one.
std::string archive_file_name(std::uint64_t first_seq, std::uint64_t last_seq, std::int64_t created_ns);

// Writes `rows` (contiguous, linked, non-empty) and `checkpoints` as
// dir/archive_file_name(...); the entry describes the file written
// (file, sha256 included). invalid_argument when the rows are not a linked run.
result<archive_entry> write_archive(const std::string& dir, std::span<const chain_row> rows,
                                    std::span<const checkpoint> checkpoints, std::int64_t created_ns);

struct archive_contents {
  archive_entry header;  // file and sha256 as read
  std::vector<chain_row> rows;
  std::vector<checkpoint> checkpoints;
};

// Reads a file written by write_archive. corruption naming the file and line
// for anything that does not parse, a header that does not match its rows,
// or rows out of order; not_found when it is missing.
result<archive_contents> read_archive(const std::string& path);

}  // namespace loom::auditchain
