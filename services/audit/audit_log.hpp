// The audit service's log in the state store (tables owned by this service;
// schema.cpp): the hash chain of libs/auditchain. The audit service is the
// single writer of its region's chain: each stored event becomes the next
// row (gapless seq, prev_hash, row_hash) with its payload sealed (AES-256-GCM
// under the day's key, keys in <data>/keys/audit); a signed checkpoint is
// written every 1,000 rows or 60 s, in the database and in the anchor file
// outside it. Each source's events are stored exactly once and in order: an
// event is accepted only when its source_seq is the next one for its source,
// so re-sends after a lost link are duplicates and gaps are refused (the
// emitter re-sends from the watermark). Rows of schema v1 (audit_events_v1,
// unchained) still count for the watermarks and answer queries.
//
//   PULL batch ─▶ append_batch: one transaction { seal + link + insert each,
//                 checkpoint when due } ─▶ commit ─▶ anchor file (fsync) ─▶ watermarks move
//   every ~second: tick() ─▶ checkpoint of the tail when 60 s passed
//
// Thread-safety: append_batch and tick from one thread (the receiver; it owns
// this object's connection); watermark()/total()/keys() from any thread.
#pragma once

#include "libs/auditchain/checkpoint.hpp"
#include "libs/status/unix_time.hpp"
#include "libs/auditchain/keyring.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::store {
class database;
class transaction;
}  // namespace loom::store
namespace loom::auditchain {
class anchor_file;
class chain_writer;
}  // namespace loom::auditchain

namespace loom::audit_service {

struct batch_outcome {
  std::uint64_t stored = 0, duplicate = 0, gap = 0, invalid = 0;
};

struct audit_log_options {
  std::string url;          // the state store
  std::string keys_dir;     // keyring + anchor signing key (layout::paths::audit_keys)
  std::string anchor_path;  // the external anchor file (layout::paths::audit_anchors)
  auditchain::anchor_policy policy{};
  auditchain::keyring_options keyring{};
  // The clock for sealing (day keys, KEK age) and checkpoints. Tests inject one.
  std::function<auditchain::sys_time()> clock = [] { return loom::wall_now(); };
  int deadline_s = 30;      // how long open() waits for an unreachable database
  // Day keys past the retention are destroyed (crypto-shredding) by tick(),
  // at most once an hour; told here so the caller can audit it.
  std::function<void(const std::vector<std::uint32_t>& days)> on_purge;
};

class audit_log {
 public:
  // Opens its own connection (retrying while unreachable until deadline_s),
  // the keyring (made on first start), the anchor signing key (generated on
  // first start, its public half next to it, its genesis checkpoint the
  // anchor file's first line) and the anchor file, and loads
  // the per-source watermarks and the chain's tail.
  static result<std::unique_ptr<audit_log>> open(audit_log_options o);
  ~audit_log();

  // Stores serialized loom.v1.AuditEvents in one transaction. Watermarks move
  // only after the commit; on an error nothing of the batch is stored (the
  // next call re-reads the committed tail: a commit whose outcome was unknown
  // cannot fork the chain).
  result<batch_outcome> append_batch(std::span<const std::string> events);
  // A checkpoint of the tail when the policy's time has passed (or `force`);
  // true when one was written.
  result<bool> tick(bool force = false);

  // Reads the watermarks and the chain's tail again from the store: a replica
  // that has just taken the lead, whose view is older than the last leader's
  // commits (same thread as append_batch).
  status reload() { return load(); }

  std::uint64_t watermark(const std::string& source) const;
  std::uint64_t total() const;       // last chained seq
  std::uint64_t anchored() const;    // newest checkpointed seq
  auditchain::keyring& keys() { return *keys_; }
  // The retention and the clock this log was opened with (the archive request's).
  std::chrono::days retention() const { return opt_.keyring.retention; }
  auditchain::sys_time now() const { return opt_.clock(); }

 private:
  explicit audit_log(audit_log_options o);
  status load();  // watermarks + writer from the committed state

  audit_log_options opt_;
  std::unique_ptr<store::database> db_;
  std::unique_ptr<auditchain::keyring> keys_;
  std::optional<auditchain::anchor_signer> signer_;
  std::unique_ptr<auditchain::anchor_file> file_;
  std::unique_ptr<auditchain::chain_writer> writer_;  // null after a failed batch: reloaded
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> watermarks_;  // committed
  std::uint64_t last_seq_ = 0;                       // committed
  std::uint64_t anchored_ = 0;
  std::chrono::steady_clock::time_point next_purge_{};
};

// Query filters; empty / 0 = any.
struct event_filter {
  std::string source;
  std::uint64_t after_source_seq = 0;  // with source
  std::string request_id;
  std::string job_id;
  std::uint64_t after_seq = 0;         // chain seq (audit_events only)
  bool newest = false;                 // the last `limit` rows (still returned in seq order)
  // Whose records: nullopt = everyone's (an admin); a tenant = only the rows
  // that name it (never the rows of no tenant, never schema v1's).
  std::optional<std::string> tenant;
};

// Stored events as serialized loom.v1.AuditEvents in order (v1 rows first,
// then the chain by seq; `seq` is set for chained rows), within f.tenant. Payloads are
// unsealed with `keys`; one whose key was destroyed (retention) or that does
// not authenticate comes back empty with `payload_state` saying why.
result<std::vector<std::string>> query_events(store::transaction& tx, auditchain::keyring& keys,
                                              const event_filter& f, std::uint32_t limit);

}  // namespace loom::audit_service
