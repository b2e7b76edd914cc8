// A durable local spool of audit events: every event gets a gapless sequence
// number and is on disk (fdatasync) before append returns, so none is lost
// while the audit service is unreachable or this process crashes. Events stay
// until the audit service confirms them (trim_through).
//
// Owns the directory: segment files seg-<first seq, 20 digits>.log, the
// confirmed-watermark file `confirmed`, and `LOCK` (flock: one process per dir).
// Record on disk (big-endian): u32 magic | u32 len | u64 seq | u32 crc32c(len, seq, bytes) | bytes.
// Thread-safety: none. Externally synchronized: one owner thread (the audit
// emitter guards it).
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::audit {

struct spool_options {
  // Start a new segment once the current one would pass this size. Small
  // enough that trimming frees space promptly, large enough that rotation
  // (one file create + dir fsync) is rare. A batch is never split, so a
  // segment may exceed this by one batch.
  std::uint64_t segment_bytes = 4 << 20;
};

class spool {
 public:
  // Largest record accepted. Audit events are small; the bound also limits
  // what a corrupted length field can make recovery read.
  static constexpr std::size_t max_record_bytes = 16 << 20;

  // Opens (creating with mode 0700) `dir`, scans every segment and repairs a
  // torn tail: a partial or checksum-failing record at the end of the last
  // segment, with nothing valid after it, is truncated away with a warning on
  // stderr. Damage anywhere else is errc::corruption naming file and offset.
  // unavailable if another process holds the spool.
  static result<std::unique_ptr<spool>> open(const std::string& dir, spool_options opt = {});
  ~spool();
  spool(const spool&) = delete;
  spool& operator=(const spool&) = delete;

  // Appends one record and fdatasyncs; returns its seq (last_seq() + 1).
  result<std::uint64_t> append(std::string_view record);
  // Appends all records with one fdatasync (group commit); returns the seq of
  // the first. A batch whose write or fdatasync fails is cut off again
  // (ftruncate to the last synced length, then fdatasync), so none of it is in
  // the spool and the caller may append it again under the same seqs. While
  // that cut cannot be made durable (the disk still failing) the spool refuses
  // appends (unavailable); each later append tries the cut again first, so the
  // spool heals by itself once the disk does. An empty batch is
  // invalid_argument.
  result<std::uint64_t> append_batch(std::span<const std::string> records);

  // Up to `max` records with seq > max(after, confirmed_seq()), in seq order.
  result<std::vector<std::pair<std::uint64_t, std::string>>> read_after(std::uint64_t after,
                                                                        std::size_t max) const;
  // The audit service stored everything <= seq: persists the watermark
  // atomically, then deletes segment files whose records are all <= seq
  // (the segment being written stays). invalid_argument if seq > last_seq().
  status trim_through(std::uint64_t seq);

  std::uint64_t last_seq() const { return last_seq_; }
  std::uint64_t confirmed_seq() const { return confirmed_; }
  std::uint64_t pending() const { return last_seq_ - confirmed_; }

 private:
  struct segment {
    std::string path;
    std::uint64_t first_seq;  // from the file name
    std::uint64_t last_seq;   // first_seq - 1 while empty
    std::uint64_t bytes;
  };

  spool(std::string dir, spool_options opt) : dir_(std::move(dir)), opt_(opt) {}
  status scan();
  status start_segment();
  // Truncates the active segment back to its last synced length and syncs;
  // clears broken_ on success.
  status cut_back();

  std::string dir_;
  spool_options opt_;
  std::vector<segment> segments_;  // ascending; the last one is written to
  std::uint64_t last_seq_ = 0;
  std::uint64_t confirmed_ = 0;
  int lock_fd_ = -1;
  int active_fd_ = -1;  // O_APPEND fd of segments_.back(), or -1
  bool broken_ = false;  // a failed write or fdatasync not yet cut off durably: refuse appends
  // Where the last read_after stopped: in hint_path_, the records before byte
  // hint_off_ all have seq <= hint_seq_. A later read from past hint_seq_
  // starts there instead of re-reading (and re-checking) the segment's head,
  // which made sending a busy segment quadratic.
  mutable std::string hint_path_;
  mutable std::uint64_t hint_seq_ = 0, hint_off_ = 0;
};

}  // namespace loom::audit
