// The external anchor: every signed checkpoint is also appended to a file
// outside the database, so an attacker with only database access cannot
// remove the evidence (drop checkpoint rows, then truncate or rewrite the
// log). One text line per checkpoint, appended and fsynced:
//   v1 <seq> <unix_ns> <key id> <row hash, 64 hex> <signature, 128 hex>\n
// A crash mid-append leaves a torn last line: open() cuts it off, readers
// skip it (and say so). No secret is in the file (mode 0644).
// An anchor_file is used by one thread (the audit writer).
#pragma once

#include "libs/auditchain/checkpoint.hpp"
#include "libs/status/status.hpp"

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::auditchain {

class anchor_file {
 public:
  // Opens for appending, creating the file (and fsyncing its directory) when
  // missing; a torn last line is truncated away.
  static result<std::unique_ptr<anchor_file>> open(const std::string& path);
  ~anchor_file();
  anchor_file(const anchor_file&) = delete;
  anchor_file& operator=(const anchor_file&) = delete;

  // Appends one line per checkpoint and fsyncs once; they are durable when
  // this returns ok.
  status append(std::span<const checkpoint> cs);
  status append(const checkpoint& c) { return append(std::span<const checkpoint>(&c, 1)); }
  const std::string& path() const { return path_; }

 private:
  anchor_file(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

struct anchor_file_contents {
  std::vector<checkpoint> checkpoints;  // in file order
  bool torn_tail = false;               // a partial last line was skipped
};

// not_found when the file does not exist; corruption naming the line number
// for a malformed complete line.
result<anchor_file_contents> read_anchor_file(const std::string& path);

std::string format_anchor_line(const checkpoint& c);  // with its '\n'
result<checkpoint> parse_anchor_line(std::string_view line);  // without '\n'

}  // namespace loom::auditchain
