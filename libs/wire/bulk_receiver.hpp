// bulk_receiver: the receiving half of a chunked, resumable, verified bulk
// transfer. Pure protocol logic over files, no sockets: the ROUTER owner feeds
// it offers and chunks (see bulk_transport.hpp). Not thread-safe: one owner.
//
// Files in dest_dir, per object `name`:
//   <name>.part         the object being assembled (chunks pwritten at their offset)
//   <name>.part.state   which chunks are verified and durable (rewritten atomically)
//   <name>              the verified object, after the last chunk
//
//   offer ──► open (.part + .state) ──chunk ok──► ... ──last chunk──► verify whole sha256
//                 ▲ resume: only missing chunks       ├─ ok:  fsync, rename -> <name>, fsync dir
//                 │ asked; a different object         └─ bad: discard .part/.state, fatal ack
//                 │ (size/sha/chunk size) discards the partial
//
// With a piece codec (bulk_pieces.hpp) the .part and the finished object are
// sealed-pieces files: each verified chunk is sealed before it touches the
// disk, and the whole-object check reads them back through the codec. The
// object's user reads it with read_pieces.
#pragma once

#include "libs/wire/bulk_pieces.hpp"
#include "libs/wire/bulk_types.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace loom::wire {

// invalid_argument unless `name` is a plain file name: not empty, no '/',
// no "..", no NUL, not "."; short enough for the ".part.state" suffix.
status validate_bulk_name(std::string_view name);

class bulk_receiver {
 public:
  // Open transfers beyond this evict the least recently used (a sender that
  // vanished must not pin file descriptors forever); its partial stays on disk.
  static constexpr std::size_t max_open_transfers = 64;

  // REQUIRES: dest_dir exists (or can be created) and is writable. A null
  // codec keeps files plain.
  explicit bulk_receiver(std::string dest_dir, std::shared_ptr<const bulk_piece_codec> codec = nullptr);
  ~bulk_receiver();
  bulk_receiver(const bulk_receiver&) = delete;
  bulk_receiver& operator=(const bulk_receiver&) = delete;

  // Starts or resumes a transfer. invalid_argument for a bad name, transfer id
  // or inconsistent sizes; file errors as returned by the OS. An offer for a
  // name already open under another transfer id replaces that transfer.
  result<bulk_need> on_offer(const bulk_offer& offer);

  // Verifies one chunk and, if good, writes it durably at its offset. The last
  // missing chunk also finishes the object (whole-file check, rename).
  bulk_ack on_chunk(const bulk_chunk_header& header, std::string_view data);

  const std::string& dest_dir() const { return dest_dir_; }

 private:
  struct transfer;
  bulk_ack finish(transfer& t, bulk_ack ack);
  void forget(const std::string& transfer_id);

  std::string dest_dir_;
  std::shared_ptr<const bulk_piece_codec> codec_;
  std::map<std::string, std::unique_ptr<transfer>> open_;  // by transfer id
  std::uint64_t tick_ = 0;                                 // LRU clock for eviction
};

}  // namespace loom::wire
