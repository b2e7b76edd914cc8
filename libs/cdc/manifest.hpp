// Merkle manifest of a dataset directory: every regular file -> its ordered
// FastCDC chunks (offset, length, sha256) -> a per-file root -> one dataset
// root. Two replicas with equal roots hold equal bytes; a differing file root
// says which files to look into, and the chunk lists say which bytes are new.
// Value types; build_manifest reads the directory on the calling thread.
//
//   file root    = SHA-256("loom-cdc-file-v1\0"    || per chunk: u64le length || sha256)
//   dataset root = SHA-256("loom-cdc-dataset-v1\0" || per file, by path:
//                          u64le len(path) || path || u64le size || file root)
//
// Stable JSON form (keys sorted, no whitespace, same bytes for the same content):
//   {"chunking":{"avg":65536,"max":262144,"min":16384},"files":[{"chunk_count":N,
//    "chunks":[[offset,length,"<sha256 hex>"],...],"path":"a/b.txt","root":"<hex>",
//    "size":N},...],"format":"loom-cdc-manifest","root":"<hex>","version":1}
// The summary form leaves out "chunks"; the cache form adds each file's "stamp".
// JSON is the form on disk (the receiver's .loom-sync/manifest.json); between
// instances manifests travel as loom.v1.SyncManifest / SyncFileEntry (protocol.hpp).
#pragma once

#include "libs/cdc/fastcdc.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace loom::cdc {

// The directory at a dataset's top level that sync keeps for itself (chunk
// store, partial transfers, the local manifest cache); never part of a manifest.
inline constexpr std::string_view sync_dir_name = ".loom-sync";

// What stat says about a file; equal stamps mean the chunk list can be reused
// without reading the file (restic's file cache rule). Local only.
struct file_stamp {
  std::uint64_t dev = 0, ino = 0, size = 0;
  std::int64_t mtime_ns = 0, ctime_ns = 0;

  bool operator==(const file_stamp&) const = default;
};

// The stamp of `path` now (lstat). Errors name the path.
result<file_stamp> stamp_of_path(const std::string& path);

struct file_entry {
  std::string path;  // relative, '/'-separated, validated by valid_relative_path
  std::uint64_t size = 0;
  crypto::digest root{};
  std::uint64_t chunk_count = 0;
  std::vector<chunk> chunks;  // empty in a summary (chunk_count still says how many)
  file_stamp stamp;           // only in locally built or cached manifests
};

struct manifest {
  params chunking;
  std::vector<file_entry> files;  // sorted by path, bytewise
  crypto::digest root{};

  const file_entry* find(std::string_view path) const;  // binary search; nullptr if absent
  std::uint64_t total_bytes() const;
};

crypto::digest file_root(const std::vector<chunk>& chunks);
crypto::digest dataset_root(const std::vector<file_entry>& files);  // REQUIRES: sorted by path

// invalid_argument unless `path` is relative, '/'-separated, with no empty,
// "." or ".." segment, no NUL, not under sync_dir_name, at most 4096 bytes.
status valid_relative_path(std::string_view path);

struct build_stats {
  std::uint64_t files_read = 0;    // chunked and hashed now
  std::uint64_t files_reused = 0;  // stamp unchanged: chunks taken from `previous`
  std::uint64_t bytes_read = 0;
};

// Walks `dir` (regular files only; symlinks and special files are skipped,
// as is <dir>/.loom-sync). Files whose stamp equals the one in `previous`
// (same path, same chunking) are not read. A file that changes while it is
// read is read again; conflict if it keeps changing. invalid_argument for a
// file name that is not valid UTF-8 or not a valid_relative_path.
result<manifest> build_manifest(const std::string& dir, const params& p = {}, const manifest* previous = nullptr,
                                build_stats* stats = nullptr);

enum class json_form {
  full,     // the stable form
  summary,  // no chunk lists: what a peer needs to compare roots
  cache,    // full + stamps: the local cache of the last sync
};
std::string to_json(const manifest& m, json_form form = json_form::full);

// Parses any form and checks it: paths valid and sorted, chunk lists
// contiguous and summing to the size, file roots and the dataset root
// recomputed. corruption naming `origin` when anything does not hold.
result<manifest> parse_manifest(std::string_view json, const std::string& origin);

// The same checks on entries and manifests that arrive in another encoding
// (the sync protocol's, protocol.hpp). check_file_entry: the path is a
// valid_relative_path and, `with_chunks`, the chunk list is contiguous from 0,
// of chunks of 1..64 MiB, chunk_count long, sums to the size and hashes to
// the root. check_manifest: chunking valid, every entry (chunk lists where
// present), paths sorted and unique, the dataset root recomputed. corruption
// saying what is wrong (check_manifest: after `origin`).
status check_file_entry(const file_entry& f, bool with_chunks);
status check_manifest(const manifest& m, const std::string& origin);

// ---- diff -------------------------------------------------------------------

struct digest_hash {
  std::size_t operator()(const crypto::digest& d) const noexcept {
    std::size_t h;
    std::memcpy(&h, d.data(), sizeof h);  // SHA-256 output is uniform already
    return h;
  }
};
using chunk_set = std::unordered_set<crypto::digest, digest_hash>;

// Every distinct chunk of `m` (files with chunk lists only) that `have` lacks,
// in manifest order, each once.
std::vector<chunk> missing_chunks(const manifest& m, const chunk_set& have);

// Paths of `to` that are new or whose root differs from `from`, and paths of
// `from` absent from `to`. Compares roots only: cost grows with the change.
struct file_diff {
  std::vector<std::string> changed;  // added or modified
  std::vector<std::string> removed;
};
file_diff diff_files(const manifest& from, const manifest& to);

}  // namespace loom::cdc
