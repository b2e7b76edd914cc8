// dataset: the shards of one manifest directory seen as a single token stream, in
// manifest order. Shards are opened and verified (structure + SHA-256 against the manifest)
// all at open (eager) or on first use (lazy). Owned by one thread: lazy opening mutates.
#pragma once

#include "libs/shards/manifest.hpp"
#include "libs/shards/reader.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace loom::shards {

enum class verify { eager, lazy };

class dataset {
 public:
  // Reads <dir>/manifest.json; in eager mode opens and verifies every shard now. A shard
  // that disagrees with the manifest (hash, tokens, docs, dtype) is errc::corruption naming it.
  static result<dataset> open(const std::string& dir, verify mode = verify::eager);
  // The same, seen through the shards placed on `node` only (manifest order;
  // info() lists just those): what a trainer reads when it trains from its own
  // node's share (data.local). invalid_argument naming the node and the nodes
  // the manifest does place shards on when none is placed on it.
  static result<dataset> open_placed(const std::string& dir, const std::string& node, verify mode = verify::eager);

  const manifest& info() const { return manifest_; }
  std::uint64_t token_count() const { return total_; }

  // Copies stream tokens [first, first + out.size()) into out, across shard boundaries.
  // invalid_argument when the range passes the end; a shard's open error in lazy mode.
  status read(std::uint64_t first, std::span<std::uint32_t> out);

  // Shard i, opened and verified on first use. REQUIRES: i < info().shards.size().
  result<const shard_reader*> shard(std::size_t i);

 private:
  std::string dir_;
  manifest manifest_;
  std::vector<std::uint64_t> starts_;  // stream offset of each shard's first token
  std::uint64_t total_ = 0;
  std::vector<std::optional<shard_reader>> open_;

  static result<dataset> from(std::string dir, manifest m, verify mode);
};

}  // namespace loom::shards
