// What a receiver checks of a pulled shard dataset before it accepts it
// (issue 24 item 16): the dataset's own manifest.json against the files that
// came with it. The sync protocol proves the bytes are the server's (every
// chunk's SHA-256, every file's root); this proves the server's manifest.json
// tells the truth about them, so a tampered manifest (zeroed hashes, token
// counts ×10, a shard listed twice) is refused instead of being recorded in
// the receiver's catalogue. Used as sync_client_options::accept by the ingest
// (`loom data sync`) and by the trainer fetching a stage's dataset.
// Stateless; thread-safe for distinct calls.
#pragma once

#include "libs/cdc/sync_client.hpp"
#include "libs/status/status.hpp"

#include <atomic>
#include <string>

namespace loom::cdc {

// Checks `v` (a staged_version of dataset `dataset`, for the messages):
//  - manifest.json is there and parses (libs/shards/manifest.hpp);
//  - every shard it lists is there once, a regular file whose size is its
//    `bytes`, whose SHA-256 (recomputed from every byte) is its `sha256`, and
//    whose header (a valid shard: magic, version, offsets, document index)
//    carries its `tokens`, `docs` and `dtype`;
//  - no shard-*.bin file came that manifest.json does not list.
// A listed shard the pull did not want (v.not_wanted: placed on another
// node) may be absent; every other one must be there.
// ok, or corruption "dataset D: manifest.json does not match the files
// received: shard-000001.bin: sha256: manifest.json says 0000…, the file's is
// 3fa2…; shard-000001.bin: tokens: manifest.json says 14000, the shard's
// header says 1400" (the first few problems, each naming the file and the
// field). unavailable once `stop` (may be null) is set.
status check_received_shards(const staged_version& v, const std::string& dataset,
                             const std::atomic<bool>* stop = nullptr);

}  // namespace loom::cdc
