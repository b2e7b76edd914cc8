#include "libs/crypto/hash.hpp"

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>

namespace loom::crypto {
namespace {
[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fatal: OpenSSL %s failed\n", what);
  std::abort();
}
}  // namespace

digest sha256(std::string_view data) {
  digest out{};
  unsigned len = 0;
  if (EVP_Digest(data.data(), data.size(), out.data(), &len, EVP_sha256(), nullptr) != 1) die("EVP_Digest");
  return out;
}

std::string sha256_hex(std::string_view data) {
  static const char* hexd = "0123456789abcdef";
  auto d = sha256(data);
  std::string s;
  s.reserve(64);
  for (auto c : d) {
    s += hexd[c >> 4];
    s += hexd[c & 15];
  }
  return s;
}

digest hmac_sha256(std::string_view key, std::string_view message) {
  // One EVP_MAC per thread: fetching is the expensive part.
  thread_local EVP_MAC* mac = EVP_MAC_fetch(nullptr, "HMAC", nullptr);
  if (!mac) die("EVP_MAC_fetch");
  EVP_MAC_CTX* ctx = EVP_MAC_CTX_new(mac);
  if (!ctx) die("EVP_MAC_CTX_new");
  char name[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, name, 0),
                         OSSL_PARAM_construct_end()};
  digest out{};
  std::size_t len = 0;
  if (EVP_MAC_init(ctx, reinterpret_cast<const unsigned char*>(key.data()), key.size(), params) != 1 ||
      EVP_MAC_update(ctx, reinterpret_cast<const unsigned char*>(message.data()), message.size()) != 1 ||
      EVP_MAC_final(ctx, out.data(), &len, out.size()) != 1)
    die("HMAC");
  EVP_MAC_CTX_free(ctx);
  return out;
}

struct sha256_stream::impl {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  ~impl() { EVP_MD_CTX_free(ctx); }
};

sha256_stream::sha256_stream() : impl_(std::make_unique<impl>()) {
  if (!impl_->ctx || EVP_DigestInit_ex(impl_->ctx, EVP_sha256(), nullptr) != 1) die("DigestInit");
}
sha256_stream::~sha256_stream() = default;

void sha256_stream::update(const void* data, std::size_t n) {
  if (EVP_DigestUpdate(impl_->ctx, data, n) != 1) die("DigestUpdate");
}
void sha256_stream::update(std::string_view data) { update(data.data(), data.size()); }

digest sha256_stream::finish() {
  digest out{};
  unsigned len = 0;
  if (EVP_DigestFinal_ex(impl_->ctx, out.data(), &len) != 1) die("DigestFinal");
  return out;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    diff |= static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(b[i]);
  return diff == 0;
}

std::string random_bytes(std::size_t n) {
  std::string out(n, '\0');
  if (n && RAND_bytes(reinterpret_cast<unsigned char*>(out.data()), static_cast<int>(n)) != 1)
    die("RAND_bytes");
  return out;
}

}  // namespace loom::crypto
