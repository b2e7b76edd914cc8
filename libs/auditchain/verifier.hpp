// The chain verifier: walks rows in seq order and finds the FIRST seq that
// cannot be trusted, and why. Pure logic: rows and anchors are handed in (the
// store walk is store_io.hpp's verify_store). It needs no data key: the hash
// covers the ciphertext. Anchors must already have had their signatures
// checked (checkpoint.hpp); an anchor whose signature failed is a fault when
// the walk reaches its seq.
//
//   fault            bad_seq                         cause
//   gap              the missing seq                 a row deleted (or seq altered)
//   prev_mismatch    the row                         prev_hash is not the previous row's hash (reorder, splice)
//   hash_mismatch    the row                         a column changed after hashing
//   malformed        the row                         a NULL or wrongly sized column
//   anchor_signature the checkpoint's seq            a checkpoint not signed by a known anchor key
//   anchor_mismatch  first seq after the last        rows rewritten with a recomputed chain: the
//                    proven one (range in reason)    signed hash differs from the chain's
//   truncated        first missing seq               the log ends below a signed checkpoint
//   anchor_missing   from_seq                        an anchor key exists but its anchor file is
//                                                    gone or holds no checkpoint (verify_store)
//   archive          the archived segment's first    an archive file listed in audit_archives is
//                    seq                             missing, altered or not the segment it claims
//
// A recomputed chain is consistent row by row, so only a checkpoint exposes
// it, and only the range (last proven seq, checkpoint seq] can be named.
// Rows after the last checkpoint are covered by the chain alone: a rewrite or
// truncation there is found only once a later checkpoint signs the tail
// (every 1,000 rows or 60 s), which the report notes.
// One thread at a time.
#pragma once

#include "libs/auditchain/row.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::auditchain {

enum class fault {
  none,
  gap,
  prev_mismatch,
  hash_mismatch,
  malformed,
  anchor_signature,
  anchor_mismatch,
  truncated,
  anchor_missing,
  archive
};
std::string_view to_string(fault f);  // "gap", "hash_mismatch", …

struct verify_report {
  fault kind = fault::none;
  std::uint64_t bad_seq = 0;       // first seq that cannot be trusted (0 when ok)
  std::uint64_t anchor_seq = 0;    // anchor_mismatch/truncated: the checkpoint's seq
  std::string reason;              // one line naming seqs, hashes, keys
  std::uint64_t from_seq = 1;      // the walk began here
  std::uint64_t last_seq = 0;      // last row walked (from_seq - 1 when none)
  std::uint64_t rows = 0;          // rows hashed
  std::uint64_t anchors = 0;       // checkpoints matched against the chain
  std::uint64_t anchored_seq = 0;  // highest seq proven by a checkpoint (0: none)
  std::vector<std::string> notes;  // not faults: unanchored tail, where anchors came from
  bool ok() const { return kind == fault::none; }
  std::string summary() const;     // "ok: …" or "<fault> at seq N: <reason>"
};

// A checkpoint as the verifier uses it: already checked for its signature.
struct anchor {
  std::uint64_t seq = 0;
  hash32 row_hash{};
  bool authentic = false;  // signature valid under a known key
  std::string origin;      // "database", "anchor file", "database and anchor file"
  std::string problem;     // why not authentic
};

class chain_verifier {
 public:
  // Walks from `from_seq` (≥ 1); `start_prev` is the row hash of from_seq - 1
  // (genesis_hash for 1). Anchors below from_seq are ignored; any order.
  chain_verifier(std::uint64_t from_seq, const hash32& start_prev, std::vector<anchor> anchors);

  // Feeds the next row in seq order. Returns false once a fault is found
  // (further rows are ignored).
  bool feed(const chain_row& r);
  // Feeds a row that could not be decoded (NULL / wrong-size column).
  void malformed(std::uint64_t seq, const std::string& why);
  // An archived segment starting at `seq` could not be read or is not the
  // one audit_archives lists (archive.hpp); the walk stops there.
  void archive_problem(std::uint64_t seq, const std::string& why);
  // After the last row: checks the tail against the anchors.
  verify_report finish();

  bool failed() const { return report_.kind != fault::none; }

 private:
  void fail(fault f, std::uint64_t seq, std::string reason);
  bool check_anchors_at(std::uint64_t seq, const hash32& h);

  row_hasher hasher_;
  std::vector<anchor> anchors_;  // sorted by seq, ≥ from_seq
  std::size_t next_anchor_ = 0;
  std::uint64_t expect_ = 1;
  hash32 prev_{};
  std::uint64_t proven_ = 0;     // last seq proven (from_seq - 1 or an anchor's seq)
  verify_report report_;
};

}  // namespace loom::auditchain
