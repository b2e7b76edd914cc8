// The sealed payload of an audit row: AES-256-GCM (OpenSSL EVP) under the
// day's data key, with a small header naming the keys. Format v1 (integers
// big-endian):
//   offset  0   u8      format version (1)
//           1   u32     KEK version that wraps the day key
//           5   u32     day id (days since 1970-01-01 UTC)
//           9   12 B    nonce
//          21   n B     ciphertext (n = plaintext length)
//        21+n   16 B    GCM tag
// AAD = the 21-byte header || context_bytes(row context), so changing the
// header or moving the ciphertext to another row (other seq, source,
// source_seq or request id) fails authentication.
//
// Nonces: 96 random bits from RAND_bytes per message. A day key encrypts at
// most one day of events; even at a sustained 20,000 events/s that is
// 1.7e9 < 2^32 messages, the NIST SP 800-38D bound for random nonces (collision
// probability below 2^-32). A counter would need durable state that survives
// crashes and concurrent processes; reusing the row's seq as nonce is unsafe
// because a seq whose transaction rolled back is encrypted again with other data.
// Stateless functions; thread-safe.
#pragma once

#include "libs/auditchain/row.hpp"
#include "libs/status/status.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace loom::auditchain {

inline constexpr std::uint8_t envelope_version = 1;
inline constexpr std::size_t header_size = 21, nonce_size = 12, tag_size = 16, key_size = 32;

struct envelope_header {
  std::uint8_t version = envelope_version;
  std::uint32_t kek_version = 0;
  std::uint32_t day = 0;
  std::array<std::uint8_t, nonce_size> nonce{};
};

// What binds a ciphertext to its row.
struct row_context {
  std::uint64_t seq = 0;
  std::string_view source;
  std::uint64_t source_seq = 0;
  std::string_view request_id;
};
row_context context_of(const chain_row& r);
// str("loom.auditchain.aad.v1") u64 seq str(source) u64 source_seq str(request_id)
std::string context_bytes(const row_context& c);

std::string encode_header(const envelope_header& h);
// corruption unless `sealed` is long enough for a header and tag and has version 1.
result<envelope_header> parse_header(std::string_view sealed);

// AES-256-GCM with an explicit 32-byte key; the keyring picks the key and
// fills the header (with a fresh nonce). REQUIRES: key.size() == key_size.
std::string seal_with_key(std::string_view key, const envelope_header& h, std::string_view plaintext,
                          std::string_view context);
// corruption "authentication failed …" when the tag does not verify.
result<std::string> open_with_key(std::string_view key, std::string_view sealed, std::string_view context);

// Fresh nonce from the OS CSPRNG.
std::array<std::uint8_t, nonce_size> random_nonce();

}  // namespace loom::auditchain
