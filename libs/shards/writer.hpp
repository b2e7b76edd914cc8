// shard_writer: appends whole documents of token ids, rolls to a new shard file when the
// current one would pass the size target, and publishes each shard and finally
// manifest.json atomically (temp -> fsync -> rename -> fsync dir), each shard sealed at
// rest when the options give keys. Owned by one thread.
#pragma once

#include "libs/shards/format.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace loom::atrest {
class kek_store;
}

namespace loom::shards {

struct writer_options {
  std::string dir;  // created if missing; existing shard-*.bin of the same name are replaced
  dtype type = dtype::uint16;
  // ~16 MiB (ARCHITECTURE.md §6): big enough that per-file costs (open, hash, fsync) are
  // small, small enough to place, re-sync and verify one shard cheaply.
  std::uint64_t target_bytes = std::uint64_t{16} << 20;
  // Node a finished shard is placed on; unset leaves "" (ingest brings rendezvous hashing).
  std::function<std::string(const shard_info&)> place;
  // Seal each shard at rest under these keys (libs/atrest; null: plain files). The
  // manifest's sha256 and bytes stay those of the plaintext: a dataset's identity does
  // not depend on its keys. `now` is the rotation clock (system_clock when unset).
  atrest::kek_store* seal = nullptr;
  std::function<std::chrono::system_clock::time_point()> now;
};

class shard_writer {
 public:
  // invalid_argument for an empty dir or a target too small for a header; errors of mkdir.
  static result<shard_writer> create(writer_options opt);

  // Adds one document. A document never straddles shards: if it would push a non-empty
  // shard past target_bytes, that shard is published first (a single document larger than
  // the target makes one oversize shard). invalid_argument for an id >= 2^16 in a uint16
  // writer (nothing is appended), or after finish().
  status append(std::span<const std::uint32_t> doc);

  // Publishes the last shard and manifest.json; returns the manifest. Call once.
  result<manifest> finish();

 private:
  explicit shard_writer(writer_options opt) : opt_(std::move(opt)) {}
  std::uint64_t bytes_with(std::uint64_t more_tokens) const;
  status publish_shard();

  writer_options opt_;
  std::string tokens_;                // ids of the open shard, already in on-disk width
  std::vector<std::uint64_t> starts_;  // document index of the open shard
  manifest manifest_;
  bool finished_ = false;
};

}  // namespace loom::shards
