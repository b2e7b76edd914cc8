// Checks the shard files of a dataset directory against what its manifest (or
// the ingest catalogue) says of them. Cheap: each file exists, is a regular
// file and has the listed size (one stat per shard, and the header of a
// sealed one: for `loom data status` and before a dataset is served). Full:
// also the SHA-256 of every byte (`loom data verify`). A shard sealed at rest
// (libs/atrest) is checked by its plaintext: the size its header and length
// give, the hash while unsealing with the process's keys (a tag that fails is
// a problem). Problems name the shard file, never a path elsewhere, so an
// error can say "dataset D: shard-000002.bin is missing".
// Stateless functions; thread-safe for distinct calls.
#pragma once

#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"

#include <atomic>
#include <span>
#include <string>
#include <vector>

namespace loom::shards {

enum class check_depth { cheap, full };

struct shard_problem {
  std::string shard;  // its name in the manifest (a file of the dataset directory)
  std::string what;   // "is missing", "has 12 bytes, the manifest says 2048", "has SHA-256 <hex>, the manifest says <hex>"
};

// One entry per shard of `shards` whose file in `dir` disagrees, in manifest
// order; empty = intact. In full mode `stop` (may be null) is polled between
// read buffers: once set, the call returns unavailable. Errors only for the
// stop flag: an unreadable shard is a problem ("cannot be read: ...").
result<std::vector<shard_problem>> check_shards(const std::string& dir, std::span<const shard_info> shards,
                                                check_depth depth, const std::atomic<bool>* stop = nullptr);

// A manifest's media tars as entries check_shards can check (name, SHA-256,
// size: what a file check needs; no tokens).
std::vector<shard_info> media_as_files(const manifest& m);

// The cheap check of <dir>/manifest.json's shards and media tars; a missing or unreadable
// manifest is itself a problem (shard = "manifest.json").
std::vector<shard_problem> check_dataset_dir(const std::string& dir);

// "shard-000002.bin is missing; shard-000003.bin has 12 bytes, the manifest
// says 2048" — the first `max` problems, then "and N more".
std::string describe(std::span<const shard_problem> problems, std::size_t max = 5);

}  // namespace loom::shards
