// bulk_sender: the sending half of a chunked bulk transfer, no sockets. Opens
// a file, computes the offer (size, chunking, whole-file SHA-256) and reads
// chunks by index with pread, each with its own SHA-256. Owns the file
// descriptor; move-only. chunk() is const and pread-based, so one sender may
// be read from several threads, but the usual owner is one transport thread.
#pragma once

#include "libs/wire/bulk_pieces.hpp"
#include "libs/wire/bulk_types.hpp"

#include <string>

namespace loom::wire {

// One chunk ready to go: its header and its bytes.
struct bulk_chunk {
  bulk_chunk_header header;
  std::string data;
};

class bulk_sender {
 public:
  // Reads `path` once to hash it. invalid_argument for a bad name or
  // chunk_bytes outside 1..max_chunk_bytes; not_found / OS errors for the file.
  // An empty transfer_id gets a random one (32 hex chars).
  // With `codec` (kept alive by the caller) the file is a sealed-pieces file
  // (bulk_pieces.hpp) of pieces of chunk_bytes: the offer and the chunks are
  // its plaintext, each piece opened as it is read.
  static result<bulk_sender> open(const std::string& path, std::string name,
                                  std::uint32_t chunk_bytes = default_chunk_bytes,
                                  std::string transfer_id = {}, const bulk_piece_codec* codec = nullptr);

  bulk_sender(bulk_sender&& other) noexcept;
  bulk_sender& operator=(bulk_sender&& other) noexcept;
  bulk_sender(const bulk_sender&) = delete;
  bulk_sender& operator=(const bulk_sender&) = delete;
  ~bulk_sender();

  const bulk_offer& offer() const { return offer_; }

  // Chunk `index` read from the file now. invalid_argument when out of range;
  // corruption when the file shrank since open().
  result<bulk_chunk> chunk(std::uint32_t index) const;

 private:
  bulk_sender(int fd, std::string path, bulk_offer offer);

  int fd_ = -1;
  std::string path_;
  bulk_offer offer_;
  const bulk_piece_codec* codec_ = nullptr;
  pieces_layout layout_;
};

}  // namespace loom::wire
