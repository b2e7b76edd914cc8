// Checkpoint snapshots (ARCHITECTURE.md §6): a directory root/step-000123/
// holding the caller's files and a MANIFEST.json listing each file's SHA-256
// and size, HMAC-SHA256-signed. A writer given at-rest keys (seal_with)
// seals every file (libs/atrest): the manifest then lists the plaintext's
// hash and size and marks the file "sealed" under the signature, so a file
// swapped for a plain one is refused; readers unseal with the process's keys
// (atrest::process_keys) and check the plaintext. Publish: temp dir -> fsync -> rename -> fsync
// root -> LATEST moves last. Load verifies everything and falls back, with a
// warning per refusal, to the previous snapshot.
// A snapshot_writer is owned by one thread; one writer per root at a time, and
// retain() must not run while a publish is in progress under the same root.
//
//   begin(root, step)            publish(key)                          load_latest
//   ---------------> .tmp-step-N ------------> step-N, then LATEST=step-N ---------> verified snapshot
//                    (ignored by load; removed by retain and by the next begin)
#pragma once

#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::atrest {
class kek_store;
}

namespace loom::ckpt {

std::string step_dir_name(std::uint64_t step);  // "step-000123"
// "step-000123" -> 123; anything else (including ".tmp-step-…") -> nullopt.
std::optional<std::uint64_t> parse_step_dir(std::string_view name);

struct file_entry {
  std::string sha256_hex;
  std::uint64_t bytes = 0;
};

struct loaded_snapshot {
  std::uint64_t step = 0;
  std::string dir;                            // root/step-000123
  std::map<std::string, file_entry> files;    // as listed in the verified manifest
  std::vector<std::string> warnings;          // every refused snapshot, with the file and hashes
};

class snapshot_writer {
 public:
  // Seals every file of the snapshots this writer publishes under `keys`
  // (null: plain files, the default), wrapping with keys->for_wrap(now).
  void seal_with(atrest::kek_store* keys, std::chrono::system_clock::time_point now) {
    seal_ = keys;
    seal_now_ = now;
  }
  // Creates root/.tmp-step-N/ (removing a stale one of the same step).
  status begin(const std::string& root, std::uint64_t step);
  // The temp directory; a caller may write files there itself, then add_existing.
  const std::string& dir() const { return tmp_dir_; }
  // Writes `bytes` as dir()/name durably. REQUIRES: begin() succeeded.
  status add_file(const std::string& name, std::string_view bytes);
  // Lists a file the caller already wrote into dir(); publish fsyncs it.
  status add_existing(const std::string& name);
  // Lists a file the caller sealed into dir() itself (an atrest::sealed_writer:
  // published durably, sealed under the keys given to seal_with), with its
  // plaintext's SHA-256 and size as the writer counted them. REQUIRES: seal_with keys.
  status add_sealed(const std::string& name, const std::string& sha256_hex, std::uint64_t bytes);
  // The clock files are sealed with (seal_with's `now`).
  std::chrono::system_clock::time_point sealing_now() const { return seal_now_; }
  // Fsyncs every file, writes the signed MANIFEST.json, renames the directory
  // to root/step-N, fsyncs root, then points root/LATEST at it. Any failed
  // fsync or rename is errc::internal naming the path, and LATEST is untouched.
  // Returns the published directory.
  result<std::string> publish(std::string_view key, std::int64_t created_unix);

 private:
  std::string root_;
  std::string tmp_dir_;
  std::uint64_t step_ = 0;
  std::vector<std::string> names_;
  std::map<std::string, file_entry> sealed_;  // add_file's sealed files, by name: their plaintext's hash
  atrest::kek_store* seal_ = nullptr;
  std::chrono::system_clock::time_point seal_now_{};
  bool open_ = false;
};

// Verifies one published snapshot directory; returns the problems found
// (empty = verified). `out` receives the manifest's file list when verified.
std::vector<std::string> verify_snapshot(const std::string& dir, std::uint64_t step, std::string_view key,
                                         loaded_snapshot* out = nullptr);

// Checks only the snapshot's MANIFEST.json: its HMAC under `key`, format and
// step — cheap (no file is hashed), for a reader that trusts the writer to
// have hashed the files (the scheduler judging a stage's result). Returns the
// problem, "" when it verifies.
std::string verify_manifest(const std::string& dir, std::uint64_t step, std::string_view key);

// Loads the newest snapshot that verifies, starting at LATEST (or the highest
// step if LATEST is missing or invalid) and going back one step at a time.
// Snapshots newer than LATEST were never committed and are ignored.
// not_found: no snapshot at all; corruption: none verified (message lists why).
result<loaded_snapshot> load_latest(const std::string& root, std::string_view key);

// Keeps the newest `keep` verified snapshots (at or below LATEST), deletes
// every older snapshot and every .tmp-* directory. Never deletes the snapshot
// LATEST names. REQUIRES: keep >= 1 (invalid_argument otherwise).
status retain(const std::string& root, std::size_t keep, std::string_view key);

}  // namespace loom::ckpt
