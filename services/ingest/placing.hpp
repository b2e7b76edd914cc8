// Placing a dataset anew (`loom data place NAME --nodes a,b,c`): when trainer
// nodes join or leave, the dataset's token shards and media tars are placed
// by the same bounded rendezvous hashing as at import
// (libs/shards/placement.hpp), so only the files whose owner changes move.
// replan() is pure (a manifest in, the new one and what moves out);
// ingest_logic checks the caller, the roster and running tasks, and writes
// manifest.json and the catalogue together.
#pragma once

#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::ingest {

struct node_share {
  std::string node;
  std::uint64_t shards = 0, media = 0, bytes = 0;
};

struct placement_plan {
  shards::manifest next;  // the manifest with the new placement
  std::uint64_t shards = 0, shards_moved = 0, media = 0, media_moved = 0, bytes_moved = 0;
  std::vector<node_share> nodes;  // every node named, in the order given
};

// The dataset of `current` placed on `nodes` (load_factor <= 0: 1.05, the
// import's default). invalid_argument for an empty, repeated or empty-named
// node list (placement.hpp's errors).
result<placement_plan> replan(const shards::manifest& current, const std::vector<std::string>& nodes,
                              double load_factor);

}  // namespace loom::ingest
