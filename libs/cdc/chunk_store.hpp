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
//
// Sealed at rest (issue 32): a store given at-rest keys (the receiver's, when
// it seals what it rebuilds) writes each adopted pack again as its chunks
// sealed one by one, back to back (atrest::seal: a data key per chunk, so a
// chunk is unsealed alone), its index lines ending in " sealed" and naming
// the sealed bytes; the pack the bulk transfer delivered is removed once the
// sealed one and its index are durable. That pack in transit
// (.loom-sync/incoming, kept across an interruption so the transfer resumes)
// is itself sealed piece by piece as it arrives (piece_codecs.hpp kek_pieces),
// so no plaintext lies on disk at any point. Costs one more write of each
// pack and its fdatasync (bench/crypt_bench case=sync_pack).
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/bulk_pieces.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::atrest {
class kek_store;
}

namespace loom::cdc {

struct stored_chunk {
  std::string pack;  // path of the pack file
  std::uint64_t offset = 0;
  std::uint32_t length = 0;  // bytes in the pack: the sealed chunk's when `sealed`
  bool sealed = false;
};

class chunk_store {
 public:
  // Loads the index of every pack already under `root` (created if needed);
  // unreadable indexes and packs without one are ignored. With `keys`, packs
  // are adopted sealed (above); sealed packs are read with them either way.
  explicit chunk_store(std::string root, std::shared_ptr<atrest::kek_store> keys = nullptr);

  // Adopts the complete pack at `pack_path` (on the same file system) as
  // `name`: `ids[i]` is `lengths[i]` bytes, back to back. The pack is moved in
  // and its index written durably (temp, fsync, rename, fsync dir); chunks are
  // not hashed here but on every get(), where a bad one is caught anyway.
  // Sealing, the pack is read, each chunk sealed into the store's pack, and
  // the pack in transit removed. With `incoming`, the pack at pack_path is a
  // sealed-pieces file (wire/bulk_pieces.hpp) opened with it: the sync's
  // partial packs never lie in the clear either. Returns the number of
  // chunks indexed. corruption when the pack's size is not the sum of the
  // lengths or a piece fails to open (naming the file).
  result<std::size_t> add_pack(const std::string& name, const std::string& pack_path,
                               const std::vector<crypto::digest>& ids, const std::vector<std::uint32_t>& lengths,
                               const wire::bulk_piece_codec* incoming = nullptr);

  // The chunk's bytes (unsealed), verified. not_found when absent; corruption
  // when every stored copy fails its hash or its seal (they are dropped from
  // the index).
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
  std::shared_ptr<atrest::kek_store> keys_;
  std::unordered_map<crypto::digest, std::vector<stored_chunk>, id_hash> index_;
};

}  // namespace loom::cdc
