// The audit keyring: envelope encryption of payloads at rest. Payloads are
// sealed (envelope.hpp) with a per-day data key (DEK, 256 bits, random); each
// DEK is wrapped (AES-256-GCM) by a versioned key-encryption key (KEK). All
// keys are files (0600) in one directory outside the database:
//   kek-000001.key      "loom-audit-kek v1 <version> <created unix ns> <key hex>"
//   dek-<day>.key       "loom-audit-dek v1 <day> <kek version> <nonce hex> <wrapped key+tag hex>"
//   dek-<day>.destroyed "destroyed <unix ns>" (0644: a tombstone, no secret)
// Rotation: the newest KEK wraps new day keys; it is replaced after
// `kek_rotation` (30 days by default, checked on every seal) or by rotate().
// Older KEKs only unwrap: nothing is ever re-wrapped or re-encrypted.
// Retention: purge(day) crypto-shreds a day key once the day is older than
// `retention` (180 days minimum) and refuses younger days; rows are never
// touched, and the chain still verifies (it hashes ciphertext).
// Several processes may share the directory (the service seals, the CLI
// opens, `loom keys rotate` rotates): files are created exclusively, never
// replaced. Thread-safe: one mutex guards the object.
#pragma once

#include "libs/auditchain/envelope.hpp"
#include "libs/status/status.hpp"

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::auditchain {

using sys_time = std::chrono::system_clock::time_point;

// Days since 1970-01-01 UTC, and its date ("2024-03-01").
std::uint32_t day_of(sys_time t);
std::string day_name(std::uint32_t day);

inline constexpr std::chrono::days min_retention{180};

struct keyring_options {
  std::chrono::days kek_rotation{30};  // a KEK older than this is replaced at the next seal
  std::chrono::days retention{180};    // ≥ min_retention: day keys younger than this are never purged
  bool create = true;                  // make the directory and KEK v1 when missing (false: readers)
  // Called (under the keyring's lock: must not call back into it) after each
  // rotation, scheduled or explicit, so the caller can audit it.
  std::function<void(std::uint32_t new_version, bool scheduled)> on_rotate;
};

struct day_key_info {
  std::uint32_t day = 0;
  std::uint32_t kek_version = 0;  // 0 when destroyed
  bool destroyed = false;
};

class keyring {
 public:
  static result<std::unique_ptr<keyring>> open(const std::string& dir, keyring_options opt, sys_time now);
  ~keyring();  // wipes the keys it holds in memory
  keyring(const keyring&) = delete;
  keyring& operator=(const keyring&) = delete;

  // Seals `plaintext` for the row `ctx` under the day key of `now` (made on
  // first use, wrapped by the current KEK), rotating the KEK first when due.
  result<std::string> seal(std::string_view plaintext, const row_context& ctx, sys_time now);
  // Opens a sealed payload of the row `ctx`. corruption ("authentication
  // failed …") when it was altered or moved; not_found ("key destroyed …")
  // when its day key was purged.
  result<std::string> unseal(std::string_view sealed, const row_context& ctx);

  // A new KEK version now; returns it.
  result<std::uint32_t> rotate(sys_time now);
  // rotate() when the current KEK is older than kek_rotation; the new version or nullopt.
  result<std::optional<std::uint32_t>> rotate_if_due(sys_time now);

  // Destroys the key of `day`: invalid_argument naming the first allowed date
  // when the day is younger than the retention; not_found when the day never
  // had a key; ok when it is (already) destroyed.
  status purge(std::uint32_t day, sys_time now);
  // purge() of every day key older than the retention; the days destroyed.
  result<std::vector<std::uint32_t>> purge_expired(sys_time now);

  std::uint32_t current_kek_version() const;
  // Every KEK version and when it was made (`loom keys status`).
  std::vector<std::pair<std::uint32_t, std::int64_t>> kek_ages() const;
  result<std::vector<day_key_info>> day_keys() const;
  const std::string& dir() const { return dir_; }

 private:
  friend struct keyring_test_access;  // tests: canary checks on raw key bytes
  using key256 = std::array<std::uint8_t, key_size>;
  struct kek {
    key256 key{};
    std::int64_t created_ns = 0;
  };
  struct dek {
    key256 key{};
    std::uint32_t kek_version = 0;
  };

  keyring(std::string dir, keyring_options opt) : dir_(std::move(dir)), opt_(std::move(opt)) {}
  status load_keks();                                            // REQUIRES: mu_
  result<std::uint32_t> rotate_locked(sys_time now, bool scheduled);
  result<const dek*> day_key(std::uint32_t day, bool create);    // REQUIRES: mu_
  status purge_locked(std::uint32_t day, sys_time now);
  std::string kek_path(std::uint32_t v) const;
  std::string dek_path(std::uint32_t day) const;
  std::string tombstone_path(std::uint32_t day) const;
  error destroyed_error(std::uint32_t day) const;

  const std::string dir_;
  const keyring_options opt_;
  mutable std::mutex mu_;
  std::map<std::uint32_t, kek> keks_;  // by version
  std::map<std::uint32_t, dek> deks_;  // unwrapped day keys, by day
};

}  // namespace loom::auditchain
