// Signed checkpoints (anchors) of the audit chain: (seq, row_hash, time, key id)
// signed with Ed25519 (OpenSSL EVP). The audit service signs one every
// 1,000 rows or 60 s (anchor_policy) and writes it to the database
// (audit_checkpoints) and to the anchor file outside it (anchor_file.hpp).
//
// Key files, in the audit keys directory (outside the database):
//   anchor-signing.key    the private key, PEM (PKCS#8), mode 0600; refused if
//                         group or others may read it
//   anchor-<key id>.pub   the public key, PEM (SubjectPublicKeyInfo), 0644;
//                         verifiers load every anchor-*.pub
// key id = hex of the first 8 bytes of SHA-256(raw 32-byte public key).
// anchor_signer and anchor_keys are immutable after load: safe from any thread.
#pragma once

#include "libs/auditchain/row.hpp"
#include "libs/status/status.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

namespace loom::auditchain {

struct checkpoint {
  std::uint64_t seq = 0;
  hash32 row_hash{};
  std::int64_t unix_ns = 0;  // when it was signed
  std::string key_id;        // 16 hex characters
  std::string signature;     // 64 bytes
  bool operator==(const checkpoint&) const = default;
};

// The signed bytes: str("loom.auditchain.checkpoint.v1") u64 seq, 32-byte row
// hash, i64 unix_ns, str(key_id) — the row encoding's conventions.
std::string signed_message(const checkpoint& c);

class anchor_signer {
 public:
  // Loads <dir>/anchor-signing.key. not_found when absent; permission_denied
  // when its mode lets group or others read it.
  static result<anchor_signer> load(const std::string& dir);
  // Makes a new key pair in `dir` (created 0700 if missing); already_exists if
  // a signing key is there.
  static result<anchor_signer> generate(const std::string& dir);
  // load(), or generate() when there is none yet.
  static result<anchor_signer> load_or_generate(const std::string& dir);

  const std::string& key_id() const { return key_id_; }
  const std::string& public_key() const { return public_raw_; }  // raw 32 bytes

  checkpoint sign(std::uint64_t seq, const hash32& row_hash, std::int64_t unix_ns) const;

 private:
  struct pkey;
  anchor_signer(std::shared_ptr<pkey> k, std::string public_raw);
  std::shared_ptr<pkey> key_;  // EVP_PKEY, shared by copies
  std::string public_raw_;
  std::string key_id_;
};

std::string key_id_of(std::string_view public_raw);

// The public keys a verifier trusts, by key id.
class anchor_keys {
 public:
  // Every <dir>/anchor-*.pub. A missing directory gives an empty set.
  static result<anchor_keys> load(const std::string& dir);
  // Adds a raw 32-byte Ed25519 public key.
  status add(std::string_view public_raw);

  // ok, or why not: unknown key id, bad signature.
  status verify(const checkpoint& c) const;
  std::size_t size() const { return keys_.size(); }

 private:
  struct pkey;
  std::map<std::string, std::shared_ptr<pkey>> keys_;
};

// When to sign: once `every_records` rows or `every` time have passed since the
// last checkpoint, if the chain grew since it. The time is the caller's clock.
struct anchor_policy {
  std::uint64_t every_records = 1000;
  std::chrono::nanoseconds every = std::chrono::seconds(60);

  bool due(std::uint64_t anchored_seq, std::int64_t anchored_unix_ns, std::uint64_t tail_seq,
           std::int64_t now_unix_ns) const;
};

}  // namespace loom::auditchain
