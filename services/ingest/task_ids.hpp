// Task ids that stay unique across restarts of the ingest service:
// "<prefix>-<n>" (imp-000001, pull-000001, ver-000001) with one counter per
// prefix, the last number used kept in a small JSON file written atomically
// before an id is handed out. So a restarted service goes on at imp-000008
// rather than reusing imp-000001, which audit records and scripts may still
// name. A missing file starts every counter at 0; an unreadable or corrupt
// one at the current unix time in seconds (far above any count reached one
// task at a time, so no id is reused) with the reason in warning().
// Not thread-safe: the task runner calls it under its lock.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <map>
#include <string>

namespace loom::ingest {

class task_ids {
 public:
  // `path` = "" keeps the counters in memory only (tests).
  explicit task_ids(std::string path);

  // The next id for `prefix`, persisted first: an error (naming the file)
  // when it cannot be written, and then no id is used up.
  result<std::string> next(const std::string& prefix);

  const std::string& warning() const { return warning_; }

 private:
  std::string path_, warning_;
  std::map<std::string, std::uint64_t> last_;
  std::uint64_t floor_ = 0;  // the start of a counter the file does not have
};

}  // namespace loom::ingest
