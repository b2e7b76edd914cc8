#include "libs/atrest/seal_format.hpp"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <cstring>

namespace loom::atrest::detail {
namespace {

const EVP_CIPHER* aes256gcm() {
  static EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);
  return c;
}

}  // namespace

void put32(unsigned char* p, std::uint32_t v) {
  for (int i = 3; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}
std::uint32_t get32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
void put64(unsigned char* p, std::uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) p[i] = static_cast<unsigned char>(v);
}

bool gcm(EVP_CIPHER_CTX* c, bool enc, const key256& key, const unsigned char* iv, const unsigned char* aad1,
         std::size_t aad1_n, const unsigned char* aad2, std::size_t aad2_n, const unsigned char* in, std::size_t n,
         unsigned char* out, unsigned char* tag) {
  int len = 0, fin = 0;
  if (enc) {
    return EVP_EncryptInit_ex2(c, aes256gcm(), key.data(), iv, nullptr) == 1 &&
           EVP_EncryptUpdate(c, nullptr, &len, aad1, static_cast<int>(aad1_n)) == 1 &&
           (aad2_n == 0 || EVP_EncryptUpdate(c, nullptr, &len, aad2, static_cast<int>(aad2_n)) == 1) &&
           (n == 0 || EVP_EncryptUpdate(c, out, &len, in, static_cast<int>(n)) == 1) &&
           EVP_EncryptFinal_ex(c, out + n, &fin) == 1 &&
           EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, static_cast<int>(sealed_tag_size), tag) == 1;
  }
  return EVP_DecryptInit_ex2(c, aes256gcm(), key.data(), iv, nullptr) == 1 &&
         EVP_DecryptUpdate(c, nullptr, &len, aad1, static_cast<int>(aad1_n)) == 1 &&
         (aad2_n == 0 || EVP_DecryptUpdate(c, nullptr, &len, aad2, static_cast<int>(aad2_n)) == 1) &&
         (n == 0 || EVP_DecryptUpdate(c, out, &len, in, static_cast<int>(n)) == 1) &&
         EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, static_cast<int>(sealed_tag_size), tag) == 1 &&
         EVP_DecryptFinal_ex(c, out + n, &fin) == 1;
}

status begin_object(kek_store& keys, sys_time now, std::uint32_t chunk, EVP_CIPHER_CTX* c,
                    unsigned char (&header)[sealed_header_size], key256& dek) {
  if (chunk < min_chunk || chunk > max_chunk)
    return make_error(errc::invalid_argument, "a sealed chunk is 4 KiB..64 MiB, not " + std::to_string(chunk));
  if (!c) return make_error(errc::internal, "no cipher context for sealing an object");
  auto kek = keys.for_wrap(now);
  if (!kek) return kek.err();
  std::memset(header, 0, sealed_header_size);
  std::memcpy(header, magic, sizeof magic);
  put32(header + 8, format_version);
  put32(header + 12, kek->first);
  put32(header + 16, chunk);
  if (RAND_bytes(dek.data(), static_cast<int>(dek.size())) != 1 || RAND_bytes(header + 24, 8 + 12) != 1) {
    OPENSSL_cleanse(kek->second.data(), kek->second.size());
    return make_error(errc::internal, "RAND_bytes failed sealing an object");
  }
  const bool ok = gcm(c, true, kek->second, header + wrap_nonce_at, header, wrap_aad_size, nullptr, 0, dek.data(),
                      dek.size(), header + wrapped_at, header + wrap_tag_at);
  OPENSSL_cleanse(kek->second.data(), kek->second.size());
  if (!ok) return make_error(errc::internal, "AES-256-GCM failed wrapping an object's data key");
  return ok_status();
}

bool seal_chunk(EVP_CIPHER_CTX* c, const key256& dek, const unsigned char (&header)[sealed_header_size],
                std::size_t i, bool last, const unsigned char* in, std::size_t n, unsigned char* out) {
  unsigned char iv[12], idx[9];
  std::memcpy(iv, header + 24, 8);
  put32(iv + 8, static_cast<std::uint32_t>(i));
  put64(idx, i);
  idx[8] = last ? 1 : 0;
  return gcm(c, true, dek, iv, header, sealed_header_size, idx, sizeof idx, in, n, out, out + n);
}

}  // namespace loom::atrest::detail
