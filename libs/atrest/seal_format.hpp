// Internal to libs/atrest: the sealed format's primitives (sealed.hpp has
// the format), shared by the whole-buffer functions (sealed.cpp) and the
// streaming writer (sealed_writer.cpp).
#pragma once

#include "libs/atrest/kek_store.hpp"
#include "libs/atrest/sealed.hpp"
#include "libs/status/status.hpp"

#include <openssl/evp.h>

#include <cstdint>
#include <memory>

namespace loom::atrest::detail {

inline constexpr char magic[8] = {'L', 'O', 'O', 'M', 'S', 'E', 'A', 'L'};
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::uint32_t min_chunk = 4096, max_chunk = 64u << 20;
inline constexpr std::size_t wrap_aad_size = 32, wrap_nonce_at = 32, wrapped_at = 44, wrap_tag_at = 76;

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;
inline cipher_ctx new_ctx() { return cipher_ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free); }

void put32(unsigned char* p, std::uint32_t v);
std::uint32_t get32(const unsigned char* p);
void put64(unsigned char* p, std::uint64_t v);

// One AES-256-GCM operation with a reused context: encrypt (tag out) or
// decrypt (tag in, false when it does not verify).
bool gcm(EVP_CIPHER_CTX* c, bool enc, const key256& key, const unsigned char* iv, const unsigned char* aad1,
         std::size_t aad1_n, const unsigned char* aad2, std::size_t aad2_n, const unsigned char* in, std::size_t n,
         unsigned char* out, unsigned char* tag);

// A new object's 92-byte header (`header`) and data key (`dek`): a random
// key and nonce prefix, the key wrapped under keys.for_wrap(now).
// invalid_argument for a chunk size outside 4 KiB..64 MiB.
status begin_object(kek_store& keys, sys_time now, std::uint32_t chunk, EVP_CIPHER_CTX* c,
                    unsigned char (&header)[sealed_header_size], key256& dek);

// Seals chunk `i` of an object (`last`: whether it is its last) from `n`
// plaintext bytes at `in` into `out` (n bytes, then the 16-byte tag).
bool seal_chunk(EVP_CIPHER_CTX* c, const key256& dek, const unsigned char (&header)[sealed_header_size],
                std::size_t i, bool last, const unsigned char* in, std::size_t n, unsigned char* out);

}  // namespace loom::atrest::detail
