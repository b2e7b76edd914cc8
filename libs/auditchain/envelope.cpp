#include "libs/auditchain/envelope.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace loom::auditchain {
namespace {

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fatal: OpenSSL %s failed\n", what);
  std::abort();
}

using cipher_ctx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const EVP_CIPHER* aes256gcm() {
  static EVP_CIPHER* c = EVP_CIPHER_fetch(nullptr, "AES-256-GCM", nullptr);  // fetched once: not per message
  if (!c) die("AES-256-GCM fetch");
  return c;
}

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out += static_cast<char>(v >> (24 - 8 * i));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (56 - 8 * i));
}
void put_str(std::string& out, std::string_view s) {
  put_u32(out, static_cast<std::uint32_t>(s.size()));
  out.append(s);
}
std::uint32_t get_u32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) | p[3];
}
const unsigned char* bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }

}  // namespace

row_context context_of(const chain_row& r) {
  return row_context{.seq = r.seq, .source = r.source, .source_seq = r.source_seq, .request_id = r.request_id};
}

std::string context_bytes(const row_context& c) {
  std::string out;
  out.reserve(48 + c.source.size() + c.request_id.size());
  put_str(out, "loom.auditchain.aad.v1");
  put_u64(out, c.seq);
  put_str(out, c.source);
  put_u64(out, c.source_seq);
  put_str(out, c.request_id);
  return out;
}

std::string encode_header(const envelope_header& h) {
  std::string out;
  out.reserve(header_size);
  out += static_cast<char>(h.version);
  put_u32(out, h.kek_version);
  put_u32(out, h.day);
  out.append(reinterpret_cast<const char*>(h.nonce.data()), h.nonce.size());
  return out;
}

result<envelope_header> parse_header(std::string_view sealed) {
  if (sealed.size() < header_size + tag_size)
    return make_error(errc::corruption, "sealed payload of " + std::to_string(sealed.size()) +
                                            " bytes is shorter than header and tag");
  const unsigned char* p = bytes(sealed);
  envelope_header h;
  h.version = p[0];
  if (h.version != envelope_version)
    return make_error(errc::corruption, "sealed payload has format version " + std::to_string(h.version) +
                                            " (this build reads version 1): authentication failed");
  h.kek_version = get_u32(p + 1);
  h.day = get_u32(p + 5);
  std::memcpy(h.nonce.data(), p + 9, nonce_size);
  return h;
}

std::array<std::uint8_t, nonce_size> random_nonce() {
  std::array<std::uint8_t, nonce_size> n{};
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) die("RAND_bytes");
  return n;
}

std::string seal_with_key(std::string_view key, const envelope_header& h, std::string_view plaintext,
                          std::string_view context) {
  std::string out = encode_header(h);
  std::string aad = out;
  aad.append(context);
  out.resize(header_size + plaintext.size() + tag_size);
  auto* ct = reinterpret_cast<unsigned char*>(out.data()) + header_size;
  cipher_ctx c(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0, fin = 0;
  if (!c || key.size() != key_size ||
      EVP_EncryptInit_ex2(c.get(), aes256gcm(), bytes(key), h.nonce.data(), nullptr) != 1 ||
      EVP_EncryptUpdate(c.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_EncryptUpdate(c.get(), ct, &len, bytes(plaintext), static_cast<int>(plaintext.size())) != 1 ||
      EVP_EncryptFinal_ex(c.get(), ct + len, &fin) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, static_cast<int>(tag_size), ct + plaintext.size()) != 1)
    die("AES-256-GCM encrypt");
  return out;
}

result<std::string> open_with_key(std::string_view key, std::string_view sealed, std::string_view context) {
  auto h = parse_header(sealed);
  if (!h) return h.err();
  std::string aad(sealed.substr(0, header_size));
  aad.append(context);
  const std::size_t n = sealed.size() - header_size - tag_size;
  std::string out(n, '\0');
  std::string tag(sealed.substr(header_size + n));
  cipher_ctx c(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int len = 0, fin = 0;
  if (!c || key.size() != key_size ||
      EVP_DecryptInit_ex2(c.get(), aes256gcm(), bytes(key), h->nonce.data(), nullptr) != 1 ||
      EVP_DecryptUpdate(c.get(), nullptr, &len, bytes(aad), static_cast<int>(aad.size())) != 1 ||
      EVP_DecryptUpdate(c.get(), reinterpret_cast<unsigned char*>(out.data()), &len, bytes(sealed) + header_size,
                        static_cast<int>(n)) != 1 ||
      EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_SET_TAG, static_cast<int>(tag_size), tag.data()) != 1)
    die("AES-256-GCM decrypt setup");
  if (EVP_DecryptFinal_ex(c.get(), reinterpret_cast<unsigned char*>(out.data()) + len, &fin) != 1) {
    OPENSSL_cleanse(out.data(), out.size());
    return make_error(errc::corruption, "authentication failed: the sealed payload was altered or belongs to "
                                        "another row");
  }
  return out;
}

}  // namespace loom::auditchain

