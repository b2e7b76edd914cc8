// sync_client: pulls one dataset from a sync_server into a local directory,
// fetching only the chunks the directory does not already hold.
//
//   ManifestRequest ──► summary (per-file roots, dataset root) ── same root as local? ──► done
//   ChunksRequest (changed files only) ──► their chunk lists, checked against the roots
//   missing = their chunks not in local files nor in <into>/.loom-sync/chunks
//   PackRequest per <= pack_bytes of missing chunks ──► bulk transfer into
//       .loom-sync/incoming ──► adopted by the chunk store (.loom-sync/chunks)
//   rebuild changed files from local + stored chunks, each chunk verified
//       (rebuild.hpp; a bad copy is fetched again) ──► options.accept(the new
//       version)? refused: nothing published ──► publish atomically
//   write .loom-sync/manifest.json (stat cache) ──► empty the chunk store
//
// Resume: stored chunks are never asked for again, and a pack cut off mid-way
// is re-requested under the same name, so the bulk transfer sends only the
// parts it had not verified. Not thread-safe: one pull at a time per object.
#pragma once

#include "libs/cdc/plain_file.hpp"
#include "libs/status/status.hpp"
#include "libs/wire/curve.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <zmq.hpp>

namespace loom::cdc {

// A version a pull is about to publish, shown to sync_client_options::accept:
// every file the directory will hold (relative path -> where its bytes can be
// read now: a rebuilt temp file, or the file already in place). Every chunk of
// a rebuilt file has been verified against its SHA-256 and every file against
// its root in the server's manifest; what the files say of each other (a
// dataset's own manifest.json) is the accept hook's to check.
struct staged_version {
  std::map<std::string, std::string> files;
  // Files of the server's version this pull was told not to want
  // (sync_client_options::want): absent here by design, not lost.
  std::set<std::string> not_wanted;
};

struct sync_client_options {
  // No message from the server for this long -> unavailable. Covers the
  // server building its manifest (~0.3 s per 256 MiB of changed files).
  std::chrono::milliseconds reply_timeout{10000};
  // Missing chunks are fetched in packs of about this size: 16 bulk chunks,
  // two windows of eight, and one pack in flight is cheap to redo.
  std::uint64_t pack_bytes = 16u << 20;
  // Files in the directory that the dataset lacks are removed (a mirror).
  bool remove_extraneous = true;
  // Which of the dataset's files (relative paths) this directory holds; empty
  // = all. An unwanted file is neither fetched nor rebuilt, and one already in
  // the directory is removed like an extraneous one (when remove_extraneous),
  // so a node keeps just its share: the shards placed on it. Asked once per
  // file of the server's manifest; staged_version::not_wanted lists the rest.
  std::function<bool(const std::string& rel)> want;
  // Fetch/verify rounds before a chunk whose copies keep failing is an error.
  int max_rounds = 3;
  // Asked once every changed file is rebuilt and verified, before anything
  // is published (not when nothing changed: the directory already holds the
  // version). Its error refuses the version: nothing in the directory
  // changes, the temps are removed (received chunks stay in the chunk store
  // for the next pull) and the pull fails with it. Empty = accept.
  std::function<status(const staged_version&)> accept;
  // Which rebuilt files are written sealed at rest, under which keys
  // (plain_file.hpp); the default writes every file plain. The sync itself
  // always works on plaintext, so a sealed and a plain copy of a dataset
  // have the same root.
  seal_policy seal;
};

struct sync_stats {
  std::string root;                         // hex dataset root now in the directory
  std::uint64_t files = 0;                  // in the dataset
  std::uint64_t files_not_wanted = 0;       // of those, left out by options.want
  std::uint64_t files_updated = 0;          // written (new or changed)
  std::uint64_t files_removed = 0;
  std::uint64_t chunks_needed = 0;          // distinct chunks of the updated files
  std::uint64_t chunks_reused = 0;          // of those, found locally (old files, chunk store)
  std::uint64_t chunks_fetched = 0;         // received in packs and stored
  std::uint64_t chunks_refetched = 0;       // of those, fetched again after a bad copy
  std::uint64_t chunk_bytes_fetched = 0;
  std::uint64_t packs = 0;                  // packs received into the chunk store
  std::uint64_t bulk_chunks_received = 0;   // bulk data frames, re-sends included
  std::uint64_t bulk_bytes_received = 0;
  std::uint64_t bulk_chunks_resent = 0;     // re-sent by the server after a bad ack
  std::uint64_t bulk_chunks_skipped = 0;    // not sent: verified here in an earlier, cut-off pull
  std::uint64_t wire_bytes_in = 0;          // every ZeroMQ frame received
  std::uint64_t wire_bytes_out = 0;         // every ZeroMQ frame sent
  double seconds = 0;                       // the whole pull, of which:
  double plan_seconds = 0;                  //   manifests both sides, diff, chunk lists
  double fetch_seconds = 0;                 //   packs: request, bulk transfer, into the store
  double rebuild_seconds = 0;               //   rebuilding changed files and publishing them
};

class sync_client {
 public:
  // CURVE client with key `mine` of the server whose public key is given.
  sync_client(zmq::context_t& ctx, wire::curve_keypair mine, std::string server_public_z85,
              sync_client_options options = {});
  // Plaintext: benchmarks and tests of the protocol only.
  sync_client(zmq::context_t& ctx, wire::bench_plaintext_t, sync_client_options options = {});

  // Makes `into_dir` (created if needed) hold dataset `dataset` of `tenant`
  // ("" = the server's default namespace) of the server at `endpoint`.
  // Errors: invalid_argument (bad name, bad reply), not_found /
  // permission_denied from the server, unavailable (no reply in time),
  // corruption (a chunk kept failing its hash), the accept hook's refusal,
  // file errors by path.
  result<sync_stats> pull(const std::string& endpoint, const std::string& tenant, const std::string& dataset,
                          const std::string& into_dir);
  // The dataset of the default namespace.
  result<sync_stats> pull(const std::string& endpoint, const std::string& dataset, const std::string& into_dir) {
    return pull(endpoint, "", dataset, into_dir);
  }

  // Statistics of the last pull, also when it failed part-way.
  const sync_stats& last_stats() const { return stats_; }

 private:
  zmq::context_t& ctx_;
  std::optional<wire::curve_keypair> mine_;
  std::string server_public_;
  sync_client_options opt_;
  sync_stats stats_;
};

}  // namespace loom::cdc
