// chain_writer: the audit service's side of the chain. For each event, in
// the caller's transaction: seal the payload (keyring), link the row (seq,
// prev_hash, row_hash) and insert it. Every `every_records` rows (1,000) a
// checkpoint of that row is signed and inserted in the same transaction —
// atomic with the rows it anchors; checkpoint_if_due adds one for the tail
// after `every` (60 s) or when forced. Checkpoints reach the anchor file
// (fsync) once the caller reports the commit, so the file never holds a
// checkpoint above the committed log, and no extra commit is paid.
//
//   open ──▶ [append(tx, …)]* ──▶ checkpoint_if_due(tx, now) ──▶ commit tx ──▶ committed()   (file append)
//                                                             └─▶ rollback  ──▶ rolled_back()  (all forgotten)
//
// The single writer of a chain: one chain_writer per chain (region), used by
// one thread. It does not own the keyring, signer or anchor file.
#pragma once

#include "libs/auditchain/anchor_file.hpp"
#include "libs/auditchain/checkpoint.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/auditchain/row.hpp"
#include "libs/auditchain/store_io.hpp"
#include "libs/status/status.hpp"

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace loom::auditchain {

struct writer_parts {
  keyring* keys = nullptr;                // seals payloads
  const anchor_signer* signer = nullptr;  // signs checkpoints
  anchor_file* file = nullptr;            // the external anchor
  anchor_policy policy{};
  tables names{};
};

// The first line of a new anchor key's anchor file: a checkpoint of seq 0
// (the genesis hash) signed by that key. For the key's whole life its anchor
// file then holds at least one checkpoint, so verify_store tells a file that
// was emptied or deleted from one that was never written. Call once, right
// after anchor_signer::generate made the key (not for an existing key: an
// emptied file must stay empty, as evidence).
status anchor_genesis(anchor_file& file, const anchor_signer& signer, sys_time now);

class chain_writer {
 public:
  // Reads the committed tail and the newest checkpoint (database and anchor
  // file). With no checkpoint yet, the 60 s clock starts at `now`.
  static result<std::unique_ptr<chain_writer>> open(store::database& db, writer_parts parts, sys_time now);
  // The same inside the caller's transaction.
  static result<std::unique_ptr<chain_writer>> open(store::transaction& tx, writer_parts parts, sys_time now);

  // Seals `plaintext` bound to the row, links and inserts it in `tx`. `r`
  // brings the event's fields; seq, payload and the hashes are set here.
  // The row returned is what was inserted. Signs and inserts a checkpoint of
  // this row when it is the `every_records`-th since the last one.
  result<chain_row> append(store::transaction& tx, chain_row r, std::string_view plaintext, sys_time now);
  // When `every` has passed since the last checkpoint (or `force`), signs the
  // tail including the rows appended in `tx` so far and inserts the
  // checkpoint in `tx`; it reaches the anchor file at committed(). The
  // checkpoint made, or nullopt (also when nothing is new since the last one).
  result<std::optional<checkpoint>> checkpoint_if_due(store::transaction& tx, sys_time now, bool force = false);

  // The caller's transaction committed: its rows are the chain, and a
  // checkpoint made in it is appended to the anchor file (fsync). An error
  // means only that append failed (the database holds the checkpoint); it is
  // retried at the next committed().
  status committed();
  // It did not commit: rows and checkpoint of the transaction are forgotten.
  void rolled_back();

  const chain_tail& committed_tail() const { return committed_; }
  std::uint64_t anchored_seq() const { return anchored_seq_; }

 private:
  explicit chain_writer(writer_parts p) : parts_(std::move(p)) {}
  status sign(store::transaction& tx, std::int64_t now_ns);

  writer_parts parts_;
  row_hasher hasher_;
  chain_tail committed_;
  chain_tail pending_;
  std::uint64_t anchored_seq_ = 0;  // newest checkpoint, committed or pending
  std::int64_t anchored_ns_ = 0;
  std::uint64_t committed_anchored_seq_ = 0;
  std::int64_t committed_anchored_ns_ = 0;
  std::vector<checkpoint> in_tx_;    // signed in the open transaction
  std::vector<checkpoint> to_file_;  // committed, not yet in the anchor file
};

}  // namespace loom::auditchain
