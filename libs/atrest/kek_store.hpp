// Key-encryption keys for data at rest (issue 32 item 3): envelope
// encryption — every sealed object has its own random data key (sealed.hpp),
// wrapped by the current KEK. KEKs are files (0600) in one directory outside
// any database, created exclusively and never replaced or re-wrapped:
//   kek-000001.key   "loom-atrest-kek v1 <version> <created unix ns> <key hex>"
// Rotation: the newest KEK wraps new data keys; once it is older than
// `rotation` (30 days by default) the next wrap makes a new version first
// (the clock is the caller's: tests inject one). Older versions only unwrap,
// so nothing written is ever rewritten. Several processes may share the
// directory (trainers, ingest, the CLI): a version another process made is
// read from disk when first needed.
// Thread-safe: one mutex guards the object.
#pragma once

#include "libs/status/status.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace loom::atrest {

using sys_time = std::chrono::system_clock::time_point;
using key256 = std::array<std::uint8_t, 32>;

struct kek_options {
  std::chrono::days rotation{30};  // 1..3650: a KEK older than this is replaced at the next wrap
  bool create = true;              // make the directory and version 1 when missing (false: readers)
  // Called after each rotation (outside the lock), scheduled or explicit, so the caller can audit it.
  std::function<void(std::uint32_t new_version, bool scheduled)> on_rotate;
};

struct kek_info {
  std::uint32_t version = 0;
  std::int64_t created_ns = 0;
};

class kek_store {
 public:
  // invalid_argument for a rotation outside 1..3650 days; not_found when the
  // directory has no KEK and o.create is false.
  static result<std::unique_ptr<kek_store>> open(const std::string& dir, kek_options o, sys_time now);
  ~kek_store();  // wipes the keys it holds
  kek_store(const kek_store&) = delete;
  kek_store& operator=(const kek_store&) = delete;

  // The KEK that wraps a new object's data key, rotated first when due.
  result<std::pair<std::uint32_t, key256>> for_wrap(sys_time now);
  // A KEK by version (unwrap); re-reads the directory for a version another
  // process made. not_found naming the file when it does not exist.
  result<key256> get(std::uint32_t version);
  // Rotates when for_wrap would (the newest KEK is past its age) without
  // handing out a key: a service rotating before its workers seal.
  status rotate_if_due(sys_time now);
  // A new version now (`loom keys rotate --at-rest`); returns it.
  result<std::uint32_t> rotate(sys_time now);

  std::vector<kek_info> list() const;  // by version
  std::chrono::days rotation() const { return opt_.rotation; }
  const std::string& dir() const { return dir_; }

 private:
  kek_store(std::string dir, kek_options o) : dir_(std::move(dir)), opt_(std::move(o)) {}
  status load();  // REQUIRES: mu_
  result<std::uint32_t> rotate_locked(sys_time now);
  std::string path_of(std::uint32_t v) const;

  struct kek {
    key256 key{};
    std::int64_t created_ns = 0;
  };
  const std::string dir_;
  const kek_options opt_;
  mutable std::mutex mu_;
  std::map<std::uint32_t, kek> keks_;
};

// The versions and ages in a KEK directory without keeping any key
// (`loom keys status`); an empty list when the directory does not exist.
result<std::vector<kek_info>> list_keks(const std::string& dir);

}  // namespace loom::atrest
