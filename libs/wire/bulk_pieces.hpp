// A bulk transfer's file kept sealed at rest, piece by piece (issue 32 item 3:
// no dataset bytes in the clear while a pack is in transit). The sender's
// scratch copy and the receiver's partial are both such files when a codec is
// given; the wire still carries plaintext pieces (CURVE encrypts the link) so
// the per-piece and whole-object SHA-256 checks are unchanged.
//
// Layout (integers big-endian):
//   header, 16 bytes: magic "LOOMBPC1" | u32 piece bytes P | u32 overhead V
//   then piece i (plaintext bytes i*P .. min((i+1)*P, total)) sealed as one
//   record of its length + V bytes, at offset 16 + i*(P+V).
// Fixed offsets let the receiver write pieces in any order and resume after
// a crash; the file's size fixes the plaintext size (every piece but the last
// is whole), so no length is stored. The codec binds each record to its
// index, so a moved or repeated record fails to open.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace loom::wire {

// Seals and opens one piece. Implementations: libs/cdc/piece_codecs.hpp (a
// key that lives only in the process; data keys wrapped by the deployment's
// KEK, for partials that outlive it). Thread-safe (const).
class bulk_piece_codec {
 public:
  virtual ~bulk_piece_codec() = default;
  // Bytes a record adds to its plaintext: the same for every piece.
  virtual std::size_t overhead() const = 0;
  // `out` (replaced) = piece `index` of `plain`, sealed.
  virtual status seal(std::string_view plain, std::uint64_t index, std::string& out) const = 0;
  // `out` (replaced) = the plaintext of record `index`. corruption naming
  // `what` when it does not authenticate.
  virtual status open(std::string_view sealed, std::uint64_t index, const std::string& what,
                      std::string& out) const = 0;
};

inline constexpr std::size_t pieces_header_bytes = 16;

// Where pieces of `piece_bytes` lie in a sealed-pieces file.
struct pieces_layout {
  std::uint32_t piece_bytes = 0;
  std::uint32_t overhead = 0;

  std::uint64_t record_bytes() const { return std::uint64_t{piece_bytes} + overhead; }
  std::uint64_t offset(std::uint64_t index) const { return pieces_header_bytes + index * record_bytes(); }
  // The file's size for `plain_bytes` of plaintext.
  std::uint64_t file_bytes(std::uint64_t plain_bytes) const;
  // The plaintext size a file of `file_bytes` holds; nullopt when no
  // plaintext size gives that file size (a file cut short or grown).
  std::optional<std::uint64_t> plain_bytes(std::uint64_t file_bytes) const;
  std::string header() const;
};

// The layout a file's first 16 bytes declare. corruption naming `what` for a
// bad magic or a piece size outside 1..64 MiB.
result<pieces_layout> parse_pieces_header(std::string_view head, const std::string& what);

// Reads record `index` (plaintext length `length`) of the sealed-pieces file
// open as `fd` and opens it into `out`; `scratch` is reused across calls.
status read_piece(int fd, const std::string& path, const pieces_layout& l, const bulk_piece_codec& codec,
                  std::uint64_t index, std::size_t length, std::string& scratch, std::string& out);

// The plaintext of the sealed-pieces file at `path`, piece by piece in order,
// each verified, to `sink`. corruption naming the file and the piece.
status read_pieces(const std::string& path, const bulk_piece_codec& codec,
                   const std::function<status(std::string_view)>& sink);
// The same from an open descriptor (not moved).
status read_pieces_fd(int fd, const std::string& path, const bulk_piece_codec& codec,
                      const std::function<status(std::string_view)>& sink);
// Its plaintext size from its header and size alone (no key needed).
result<std::uint64_t> pieces_plain_size(const std::string& path);
// The layout and plaintext size of the sealed-pieces file open as `fd`.
struct pieces_file {
  pieces_layout layout;
  std::uint64_t plain_bytes = 0;
};
result<pieces_file> read_pieces_layout(int fd, const std::string& path);

// Writes plaintext appended in any amounts as a sealed-pieces file: a new
// file at `path` (0600, O_NOFOLLOW, replaced), sealing each piece as it fills.
class pieces_writer {
 public:
  static result<pieces_writer> create(const std::string& path, std::uint32_t piece_bytes,
                                      const bulk_piece_codec& codec);
  pieces_writer(pieces_writer&& o) noexcept;
  pieces_writer& operator=(pieces_writer&&) = delete;
  pieces_writer(const pieces_writer&) = delete;
  ~pieces_writer();  // an unfinished file is removed

  status append(std::string_view plain);
  // Seals the last piece, closes the file. Returns the plaintext bytes.
  result<std::uint64_t> finish();

 private:
  pieces_writer(int fd, std::string path, pieces_layout l, const bulk_piece_codec& codec);
  status flush_piece();

  int fd_ = -1;
  std::string path_;
  pieces_layout layout_;
  const bulk_piece_codec* codec_;
  std::string piece_, sealed_;
  std::uint64_t index_ = 0, plain_ = 0;
};

}  // namespace loom::wire
