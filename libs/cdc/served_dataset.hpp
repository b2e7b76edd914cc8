// The serving side's view of its datasets: a manifest snapshot per dataset,
// refreshed on demand with the stat cache (unchanged files are not re-read),
// an index chunk id -> where its bytes are, and pack building (the requested
// chunks, read from the dataset's files and re-verified, into one file for
// the bulk transfer). Pure file logic, no sockets.
// dataset_cache is thread-safe (sessions share it); snapshots are immutable.
#pragma once

#include "libs/cdc/manifest.hpp"
#include "libs/wire/bulk_pieces.hpp"
#include "libs/wire/bulk_types.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom::cdc {

struct chunk_location {
  std::uint32_t file = 0;   // index into snapshot.m.files
  std::uint32_t chunk = 0;  // index into that file's chunks
};

struct snapshot {
  std::string dir;  // the dataset directory the manifest describes
  manifest m;
  std::unordered_map<crypto::digest, chunk_location, digest_hash> index;
};

class dataset_cache {
 public:
  explicit dataset_cache(params chunking);

  // A fresh snapshot of the dataset directory `dir` (where the server's
  // locate hook put dataset `dataset`; the name is for errors). not_found
  // when it is no directory.
  result<std::shared_ptr<const snapshot>> refresh(const std::string& dir, const std::string& dataset);

 private:
  const params chunking_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const snapshot>> last_;  // by directory; guarded by mu_
};

// Writes the chunks `ids` in order into a new file at `pack_path` and returns
// its size. Every chunk is read from the snapshot's files and re-hashed:
// not_found for an id the snapshot lacks, conflict when a file no longer
// holds the bytes its manifest says (changed since), invalid_argument past
// max_pack_bytes. `corrupt_first` (TEST ONLY) flips one byte of the first
// chunk after hashing, as a link would. With `codec` the file is a
// sealed-pieces file of `piece_bytes` pieces (wire/bulk_pieces.hpp): the
// chunks never touch the disk in the clear; the size returned is the
// plaintext's.
result<std::uint64_t> build_pack(const snapshot& s, const std::vector<crypto::digest>& ids,
                                 const std::string& pack_path, bool corrupt_first = false,
                                 const wire::bulk_piece_codec* codec = nullptr,
                                 std::uint32_t piece_bytes = wire::default_chunk_bytes);

}  // namespace loom::cdc
