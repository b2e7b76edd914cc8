// The audit service's append-only log in the state store (table audit_events,
// owned by this service; schema.cpp). The audit service is the single writer:
// `seq` is gapless across all sources. Each source's events are stored exactly
// once and in order: an event is accepted only when its source_seq is the
// next one for its source, so re-sends after a lost link are duplicates and
// gaps are refused (the emitter re-sends from the watermark).
// Thread-safety: append_batch from one thread (the receiver; it owns this
// object's connection); watermark()/total() from any thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace loom::store {
class database;
class transaction;
}  // namespace loom::store

namespace loom::audit_service {

struct batch_outcome {
  std::uint64_t stored = 0, duplicate = 0, gap = 0, invalid = 0;
};

class audit_log {
 public:
  // Opens its own connection to `url` (retrying while unreachable until
  // `deadline_s` passes) and loads the per-source watermarks.
  static result<std::unique_ptr<audit_log>> open(const std::string& url, int deadline_s = 30);
  ~audit_log();

  // Stores serialized loom.v1.AuditEvents in one transaction. Watermarks move
  // only after the commit; on an error nothing of the batch is stored.
  result<batch_outcome> append_batch(std::span<const std::string> events);

  std::uint64_t watermark(const std::string& source) const;
  std::uint64_t total() const;

 private:
  explicit audit_log(std::unique_ptr<store::database> db);

  std::unique_ptr<store::database> db_;
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> watermarks_;  // committed
  std::uint64_t last_seq_ = 0;                       // committed
};

// Stored events as serialized loom.v1.AuditEvents in seq order. Filters are
// optional (empty / 0); `after_seq` applies to source_seq when `source` is set.
result<std::vector<std::string>> query_events(store::transaction& tx, const std::string& source,
                                              std::uint64_t after_seq, const std::string& request_id,
                                              std::uint32_t limit);

}  // namespace loom::audit_service
