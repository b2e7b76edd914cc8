// The on-disk life of one import: an exclusive lock per dataset name, a private
// staging directory where the new version is written, a scratch directory for
// spills, and the publish step that makes the new version the dataset.
//
//   <root>/<name>/                         the published dataset (what readers open)
//   <root>/.staging/<name>.lock            flock()ed while an import of <name> runs
//   <root>/.staging/<name>.<id>/           the new version being written
//   <root>/.staging/<name>.<id>.work/      scratch: dedup runs, pass-1 spill (never published)
//   <root>/.staging/<name>.<id>.old/       the previous version, only during a fallback publish
//
// publish(): everything is fsynced first; then renameat2(RENAME_EXCHANGE) swaps
// the staging directory with <root>/<name> in one step, and the old version
// (now in staging's place) is removed. File systems without RENAME_EXCHANGE get
// three renames (old -> .old, new -> <name>, remove .old); a crash between the
// first two leaves <name> missing and its .old complete, which begin() (or
// recover()) renames back. So after a crash at any point, and recovery, <name>
// is the old or the new complete version. Dot names are never datasets
// (validate_dataset_name), so .staging is never served or synced.
//
// One staging object per import, used by the importing thread; the lock keeps a
// second import of the same name (any process) out until it is destroyed.
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <vector>

namespace loom::ingest {

class staging {
 public:
  // Takes the lock (conflict when another import of `name` holds it), recovers
  // <name> from a crashed fallback publish, removes leftover directories of
  // earlier crashed imports of `name`, and creates dir() and work_dir().
  // REQUIRES: validate_dataset_name(name) ok.
  static result<staging> begin(const std::string& root, const std::string& name, const std::string& import_id);

  staging(staging&& o) noexcept;
  staging& operator=(staging&&) = delete;
  staging(const staging&) = delete;
  staging& operator=(const staging&) = delete;
  // Removes dir() (unless published) and work_dir(); releases the lock.
  ~staging();

  const std::string& dir() const { return dir_; }
  const std::string& work_dir() const { return work_; }
  const std::string& final_dir() const { return final_; }

  // Makes dir() the dataset, replacing the previous version. Call once.
  status publish();

 private:
  staging() = default;
  std::string root_, name_, dir_, work_, final_, old_;
  int lock_fd_ = -1;
  bool published_ = false;
};

// Renames <root>/.staging/<name>.*.old back to <root>/<name> when <name> is
// missing (a fallback publish that crashed half-way). begin() calls it under the
// lock; anyone else only while no import of `name` can run.
status recover(const std::string& root, const std::string& name);

// What killed imports left behind, for every dataset name at once (the
// service calls it at start): for each name with <name>.<id>[.work|.old]
// entries in <root>/.staging whose lock it can take — no live import of that
// name holds it, in this process or another — recover(), then remove them.
// Entries of a name whose lock is held are left to their import. Returns the
// entries removed (names inside .staging); lock files stay (removing one an
// importer has open would let two imports hold "the" lock).
result<std::vector<std::string>> clean_stale(const std::string& root);

}  // namespace loom::ingest
