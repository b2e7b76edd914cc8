// The audit service's append-only event log (until the state store lands):
// one file of length-prefixed, checksummed loom.v1.AuditEvent records.
// Each source's events are stored exactly once and in order: an event is
// accepted only when its source_seq is the next one for its source, so
// re-sends after a lost link are recognised as duplicates and gaps are
// refused (the emitter re-sends from the watermark).
// Thread-safe: the receiver thread appends, the service actor queries.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace loom::audit_service {

class event_store {
 public:
  enum class outcome { stored, duplicate, gap, invalid };

  // Opens (creating) <dir>/events.log; a torn tail from a crash is cut off.
  static result<std::unique_ptr<event_store>> open(const std::string& dir);
  ~event_store();

  // Appends one serialized AuditEvent (not yet durable: call sync()).
  outcome append(std::string_view event_bytes);
  // Makes appended events durable and publishes their watermarks.
  status sync();

  // Highest durable source_seq stored for `source` (0 = none).
  std::uint64_t watermark(const std::string& source) const;
  std::uint64_t total() const;
  // Durable events in file order, filtered; limit 0 = all.
  result<std::vector<std::string>> scan(const std::string& source, std::uint64_t after_seq,
                                        const std::string& request_id, std::size_t limit) const;

 private:
  event_store(std::string path, int fd);

  std::string path_;
  int fd_ = -1;
  mutable std::mutex mu_;
  std::map<std::string, std::uint64_t> next_;     // appended (maybe not durable)
  std::map<std::string, std::uint64_t> durable_;  // published by sync()
  std::uint64_t total_ = 0, durable_total_ = 0;
  std::uint64_t durable_bytes_ = 0, bytes_ = 0;
};

}  // namespace loom::audit_service
