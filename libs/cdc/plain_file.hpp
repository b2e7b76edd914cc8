// A dataset file as the sync sees it: its plaintext. Datasets are sealed at
// rest (libs/atrest: every site seals under its own keys, with a new data key
// per object), so their bytes on disk differ on every site and every write;
// the sync chunks, compares, packs and rebuilds the plaintext instead, and
// the receiver seals what it rebuilds under its own keys. A plain file is read
// where it lies; a sealed one is read through the same descriptor and
// unsealed whole (every tag verified) under the process's keys — dataset
// files are shards of ~16 MiB and JSONL records. Move-only; one thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace loom::atrest {
class kek_store;
}

namespace loom::cdc {

// Which files a receiver writes sealed, and under which keys: the files whose
// relative path `which` says yes to (every file when it is empty) are sealed
// under `keys`; with no keys every file is written plain.
struct seal_policy {
  std::shared_ptr<atrest::kek_store> keys;
  std::function<bool(const std::string& rel)> which;
  bool seals(const std::string& rel) const { return keys && (!which || which(rel)); }
};

class plain_file {
 public:
  // Opens `path` (never through a symlink). A sealed file is unsealed now:
  // corruption naming the path when a tag fails, not_found when this process
  // has no keys or lacks the KEK version it names.
  static result<plain_file> open(const std::string& path);
  plain_file(plain_file&& o) noexcept;
  plain_file& operator=(plain_file&& o) noexcept;
  plain_file(const plain_file&) = delete;
  plain_file& operator=(const plain_file&) = delete;
  ~plain_file();

  int fd() const { return fd_; }  // for fstat: the file as it lies on disk
  bool sealed() const { return sealed_; }
  std::uint64_t size() const { return size_; }  // of the plaintext
  // A sealed file's whole plaintext; empty for a plain one.
  std::string_view plaintext() const { return plain_; }
  // n bytes of plaintext at `offset`; conflict naming the path when the file
  // ends first (it changed since its manifest).
  status read(std::uint64_t offset, char* buf, std::size_t n) const;

 private:
  plain_file() = default;
  int fd_ = -1;
  bool sealed_ = false;
  std::uint64_t size_ = 0;
  std::string path_, plain_;
};

// Files a reader draws chunks from, open together by path; of the sealed ones
// (unsealed whole in memory) only the last stays, so reading across many
// shards holds one. One owner.
class plain_file_cache {
 public:
  result<const plain_file*> get(const std::string& path);
  void clear() { files_.clear(); }

 private:
  std::map<std::string, plain_file> files_;
};

}  // namespace loom::cdc
