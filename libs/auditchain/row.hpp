// loom::auditchain rows: one audit_events row as the hash chain sees it, its
// canonical byte encoding and its hash,
//   row_hash = SHA-256(prev_hash || canonical(row)),  prev_hash of seq 1 = 32 zero bytes.
// The payload column holds the sealed (encrypted) payload (envelope.hpp), so the
// chain covers the ciphertext and verifying it needs no data key.
// chain_row is a plain value type; a row_hasher is owned by one thread.
#pragma once

#include "libs/status/status.hpp"

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace loom::auditchain {

using hash32 = std::array<std::uint8_t, 32>;

// prev_hash of the first row (seq 1).
inline constexpr hash32 genesis_hash{};

// The canonical encoding a row is hashed with (below). New rows are written
// with the current one; a row keeps the version it was written with, so
// rows stored before tenants existed (version 1) verify as they always did.
inline constexpr std::int32_t row_version_v1 = 1;        // no tenant
inline constexpr std::int32_t current_row_version = 2;   // + tenant

// One row of audit_events (store_io.hpp has the DDL). Field order here is the
// order of the canonical encoding.
struct chain_row {
  std::uint64_t seq = 0;         // 1, 2, 3, … gapless: the chain's order
  std::int64_t unix_ns = 0;      // when the event happened (emitter's clock)
  std::string source;            // emitting service instance ("scheduler@host")
  std::uint64_t source_seq = 0;  // the source's own gapless number (dedup key)
  std::string service;           // emitting service
  std::string peer_key;          // CURVE principal of the connection
  std::string principal;
  std::string role;
  std::string zone;
  std::string action;            // request type or named operation ("token.issue")
  std::string job_id;
  std::string request_id;
  std::int32_t decision = 0;     // loom.v1.Decision number (1 allow, 2 deny, 3 error)
  std::string reason;
  std::string payload;           // sealed payload: header || ciphertext || tag
  std::string tenant;            // v2: whose trail it is ("" = no tenant's: admins only)
  std::int32_t version = current_row_version;  // which canonical encoding (not itself a field of it)
  hash32 prev_hash{};            // row_hash of seq - 1 (genesis_hash for seq 1)
  hash32 row_hash{};
};

// Canonical encoding, by r.version. Unambiguous by construction: a fixed
// field sequence in which every integer has a fixed width (big-endian) and
// every string is preceded by its length:
//   version 1:
//   str("loom.auditchain.row.v1")
//   u64 seq, i64 unix_ns, str source, u64 source_seq, str service, str peer_key,
//   str principal, str role, str zone, str action, str job_id, str request_id,
//   i32 decision, str reason, str payload
//   version 2: the same with the tag "loom.auditchain.row.v2", then str tenant
// where str(x) = u32 length || bytes. The tag names the version, so a row
// relabelled to another version no longer hashes to its row_hash. prev_hash
// and row_hash are not part of it (prev_hash is hashed in front of it).
// Appends to `out`.
// REQUIRES: every string shorter than 4 GiB and a known version (valid_row checks).
void append_canonical(const chain_row& r, std::string& out);
std::string canonical_bytes(const chain_row& r);

// invalid_argument when a field cannot be encoded (a string of 4 GiB or
// more), seq is 0, the version is unknown, or a version 1 row has a tenant
// (version 1 cannot encode one: it would not be covered by the hash).
status valid_row(const chain_row& r);

// SHA-256 over prev_hash || canonical(row), reusing one digest context and one
// buffer: the verifier's hot loop. One thread at a time.
class row_hasher {
 public:
  row_hasher();
  ~row_hasher();
  row_hasher(const row_hasher&) = delete;
  row_hasher& operator=(const row_hasher&) = delete;

  hash32 hash(const hash32& prev_hash, const chain_row& r);

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
  std::string buf_;
};

// The same with a thread-local hasher, for code off the hot path.
hash32 compute_row_hash(const hash32& prev_hash, const chain_row& r);

// The end of a chain: the last seq and its row hash (0 and genesis_hash when empty).
struct chain_tail {
  std::uint64_t last_seq = 0;
  hash32 last_hash = genesis_hash;
  bool operator==(const chain_tail&) const = default;
};

// Appends r to the chain: r.seq = tail.last_seq + 1, r.prev_hash = tail.last_hash,
// r.row_hash computed; the tail moves to r. Every other field must already be
// final (the payload sealed): the hash covers them.
void link(chain_tail& tail, chain_row& r, row_hasher& h);

std::string to_hex(const hash32& h);
std::string_view as_view(const hash32& h);
// nullopt unless `bytes` is exactly 32 bytes.
std::optional<hash32> hash_from_bytes(std::string_view bytes);

}  // namespace loom::auditchain
