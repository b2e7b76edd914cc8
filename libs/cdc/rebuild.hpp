// rebuilder: the receiving side's file work, no sockets. Knows where each
// chunk can be had locally (the chunk store, or an offset in a file already in
// the directory), rebuilds changed files from those chunks into temp files
// under <dir>/.loom-sync/tmp, verifying every chunk's SHA-256 and each file's
// root, then publishes them all at once:
//
//   build(f) ... build(g) ──► syncfs (temps durable) ──► remove vanished files
//                         ──► rename each temp over its path ──► fsync each touched dir
//
// Old files stay readable until every build is done, so a chunk may come from
// a file that is itself being replaced. A chunk whose copies all fail their
// hash is forgotten (have() turns false) so the caller fetches it again.
// The chunk store is the caller's; the rebuilder reads from it.
// Not thread-safe: one owner (a sync_client pull).
#pragma once

#include "libs/cdc/chunk_store.hpp"
#include "libs/cdc/manifest.hpp"
#include "libs/cdc/plain_file.hpp"

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom::cdc {

class rebuilder {
 public:
  struct counters {
    std::uint64_t from_store = 0;  // chunks read from the chunk store
    std::uint64_t from_local = 0;  // chunks read from files already in the directory
    std::uint64_t bad_copies = 0;  // copies that failed their hash (dropped)
  };

  // `local` describes what is in `dir` now (its chunk lists say where each
  // chunk lies); the store's current contents count as available.
  // Files `seal` says so of are written sealed at rest (plain_file.hpp); every
  // local copy is read as its plaintext, sealed or not.
  rebuilder(std::string dir, chunk_store& store, const manifest& local, seal_policy seal = {});
  ~rebuilder();  // removes temps not published
  rebuilder(const rebuilder&) = delete;
  rebuilder& operator=(const rebuilder&) = delete;

  bool have(const crypto::digest& id) const;  // obtainable locally (not yet verified)

  // Writes `f` into a temp file. corruption when some chunk could not be had
  // verified (its bad copies are now forgotten; nothing of `f` is kept).
  status build(const file_entry& f);

  // Publishes every built file (see the diagram) and removes `removed`
  // (relative paths). Errors name the path; files renamed before an error stay.
  status publish(const std::vector<std::string>& removed);

  // Files built and not yet published: (temp path, relative target), in build order.
  const std::vector<std::pair<std::string, std::string>>& built() const { return built_; }

  const counters& stats() const { return counters_; }

 private:
  struct location {
    std::string path;  // relative to dir_
    std::uint64_t offset = 0;
    std::uint32_t length = 0;
  };
  result<std::string> read_chunk(const chunk& c);

  const std::string dir_, tmp_dir_;
  chunk_store& store_;
  std::unordered_map<crypto::digest, location, digest_hash> local_;
  seal_policy seal_;
  plain_file_cache sources_;  // open local sources
  std::vector<std::pair<std::string, std::string>> built_;  // temp path -> relative target
  std::uint64_t next_tmp_ = 0;
  counters counters_;
};

}  // namespace loom::cdc
