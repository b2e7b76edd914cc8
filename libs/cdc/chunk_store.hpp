// Content-addressed chunk store on the receiving side, keyed by SHA-256.
// Chunks arrive in packs (chunks back to back, see protocol.hpp); a received
// pack is verified chunk by chunk and adopted whole, beside an index naming
// what it holds and where:
//
//   <root>/pack-<40 hex>       the pack's bytes, as the bulk transfer delivered them
//   <root>/pack-<40 hex>.idx   one line per chunk: "<sha256 hex> <offset> <length>"
//
// Why packs and not one file per chunk: on ext4 mounted with `discard` (this
// project's machines) unlinking a file costs ~4 ms, so emptying a store of
// 900 64 KiB chunks after a 64 MB sync took 3.4-3.8 s; one file per chunk also
// wrote every byte a second time and needed a syncfs. A pack needs neither:
// the bulk transfer already made it durable.
//
// Chunks land here before any file is rebuilt, which is what lets an
// interrupted sync resume without fetching them again. Every read verifies the
// hash; a copy that fails is dropped from the index so the chunk is fetched
// again. Not thread-safe: one owner.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::cdc {

struct stored_chunk {
  std::string pack;  // path of the pack file
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
};

class chunk_store {
 public:
  // Loads the index of every pack already under `root` (created if needed);
  // unreadable indexes and packs without one are ignored.
  explicit chunk_store(std::string root);

  // Adopts the complete pack at `pack_path` (on the same file system) as
  // `name`: `ids[i]` is `lengths[i]` bytes, back to back. The pack is moved in
  // and its index written durably (temp, fsync, rename, fsync dir); chunks are
  // not hashed here but on every get(), where a bad one is caught anyway.
  // Returns the number of chunks indexed. corruption when the pack's size is
  // not the sum of the lengths.
  result<std::size_t> add_pack(const std::string& name, const std::string& pack_path,
                               const std::vector<crypto::digest>& ids, const std::vector<std::uint32_t>& lengths);

  // The chunk's bytes, verified. not_found when absent; corruption when every
  // stored copy fails its hash (they are dropped from the index).
  result<std::string> get(const crypto::digest& id);

  bool contains(const crypto::digest& id) const { return index_.contains(id); }  // indexed; not re-verified
  std::size_t size() const { return index_.size(); }                              // distinct chunks
  const stored_chunk* locate(const crypto::digest& id) const;                      // first copy, or nullptr
  status clear();  // removes every pack and index
  const std::string& root() const { return root_; }

 private:
  struct id_hash {
    std::size_t operator()(const crypto::digest& d) const noexcept;
  };
  std::string root_;
  std::unordered_map<crypto::digest, std::vector<stored_chunk>, id_hash> index_;
};

}  // namespace loom::cdc
