// manifest.json of a shard directory: every shard with its SHA-256, size, token and
// document counts, dtype and the node it is placed on. Value types; no shared state.
//
//   {"format": "loom-shards", "version": 1,
//    "shards": [{"name": "shard-000001.bin", "sha256": "<hex>", "bytes": N, "tokens": N,
//                "docs": N, "dtype": "uint16", "node": ""}, ...],
//    "media": [{"name": "media-000001.tar", "sha256": "<hex>", "bytes": N, "records": N,
//               "kind": "image", "node": ""}, ...]}      (only when the dataset has media)
#pragma once

#include "libs/shards/format.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::shards {

inline constexpr std::string_view manifest_file_name = "manifest.json";

// Which files of a dataset directory are sealed at rest (libs/atrest) where
// sealing is on: everything with documents in it — the shards, records.jsonl,
// rejects.jsonl and anything else — but its two descriptions, manifest.json
// (names, counts, the plaintext's SHA-256) and report.json (the import's
// counts), which every tool reads plain. `rel` is relative to the dataset.
inline bool sealed_in_dataset(std::string_view rel) { return rel != manifest_file_name && rel != "report.json"; }

struct shard_info {
  std::string name;    // file name inside the dataset directory, no '/'
  std::string sha256;  // lower-case hex of the whole file
  std::uint64_t bytes = 0;
  std::uint64_t tokens = 0;
  std::uint64_t docs = 0;
  dtype type = dtype::uint16;
  std::string node;  // placement; "" until ingest places it
};

// A WebDataset-style tar of media records (ingest's images and audio: for
// each record KEY, KEY.<ext> with the normalised bytes, KEY.txt with the
// caption when there is one, KEY.json with what ingest knows of it). Placed,
// synced, sealed and checked like a token shard; never read as tokens.
struct media_shard_info {
  std::string name;    // "media-000001.tar"
  std::string sha256;  // of the plaintext tar
  std::uint64_t bytes = 0;
  std::uint64_t records = 0;
  std::string kind;  // "image", "audio" or "mixed"
  std::string node;
};

struct manifest {
  std::vector<shard_info> shards;  // in token-stream order
  std::vector<media_shard_info> media;  // "media" in JSON, absent when empty
  std::uint64_t total_tokens() const;
};

std::string to_json(const manifest& m);
// corruption naming `origin` and the field when the text is not a valid manifest.
result<manifest> parse_manifest(std::string_view json, const std::string& origin);
// Reads <dir>/manifest.json; not_found when absent.
result<manifest> read_manifest(const std::string& dir);
// Publishes <dir>/manifest.json atomically (temp -> fsync -> rename -> fsync dir).
status write_manifest(const std::string& dir, const manifest& m);

}  // namespace loom::shards
