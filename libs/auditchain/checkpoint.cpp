#include "libs/auditchain/checkpoint.hpp"

#include "libs/files/secret_files.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/files/files.hpp"
#include "libs/crypto/hash.hpp"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

namespace loom::auditchain {
namespace {

constexpr std::string_view checkpoint_tag = "loom.auditchain.checkpoint.v1";
constexpr const char* signing_file = "/anchor-signing.key";

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "fatal: OpenSSL %s failed\n", what);
  std::abort();
}

using pkey_ptr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using bio_ptr = std::unique_ptr<BIO, decltype(&BIO_free)>;
using md_ctx_ptr = std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)>;

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out += static_cast<char>(v >> (56 - 8 * i));
}
void put_str(std::string& out, std::string_view s) {
  auto n = static_cast<std::uint32_t>(s.size());
  for (int i = 0; i < 4; ++i) out += static_cast<char>(n >> (24 - 8 * i));
  out.append(s);
}

std::string raw_public(EVP_PKEY* k) {
  std::string out(32, '\0');
  std::size_t len = out.size();
  if (EVP_PKEY_get_raw_public_key(k, reinterpret_cast<unsigned char*>(out.data()), &len) != 1 || len != 32)
    die("EVP_PKEY_get_raw_public_key");
  return out;
}

std::string bio_text(BIO* b) {
  char* p = nullptr;
  long n = BIO_get_mem_data(b, &p);
  return std::string(p, static_cast<std::size_t>(n));
}

pkey_ptr read_pem(const std::string& pem, bool private_key) {
  bio_ptr b(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  EVP_PKEY* k = private_key ? PEM_read_bio_PrivateKey(b.get(), nullptr, nullptr, nullptr)
                            : PEM_read_bio_PUBKEY(b.get(), nullptr, nullptr, nullptr);
  pkey_ptr out(k, EVP_PKEY_free);
  if (out && !EVP_PKEY_is_a(out.get(), "ED25519")) out.reset();
  return out;
}

}  // namespace

std::string signed_message(const checkpoint& c) {
  std::string m;
  m.reserve(96);
  put_str(m, checkpoint_tag);
  put_u64(m, c.seq);
  m.append(as_view(c.row_hash));
  put_u64(m, static_cast<std::uint64_t>(c.unix_ns));
  put_str(m, c.key_id);
  return m;
}

std::string key_id_of(std::string_view public_raw) {
  return crypto::to_hex(crypto::as_view(crypto::sha256(public_raw)).substr(0, 8));
}

struct anchor_signer::pkey {
  EVP_PKEY* p = nullptr;
  ~pkey() { EVP_PKEY_free(p); }
};

anchor_signer::anchor_signer(std::shared_ptr<pkey> k, std::string public_raw)
    : key_(std::move(k)), public_raw_(std::move(public_raw)), key_id_(key_id_of(public_raw_)) {}

result<anchor_signer> anchor_signer::load(const std::string& dir) {
  const std::string path = dir + signing_file;
  auto pem = files::secret::read_private(path);
  if (!pem) return pem.err();
  pkey_ptr k = read_pem(*pem, true);
  if (!k) return make_error(errc::corruption, path + " is not a PEM Ed25519 private key");
  std::string pub = raw_public(k.get());
  auto holder = std::make_shared<pkey>();
  holder->p = k.release();
  return anchor_signer(std::move(holder), std::move(pub));
}

result<anchor_signer> anchor_signer::generate(const std::string& dir) {
  if (auto s = files::secret::make_private_dir(dir); !s) return s.err();
  const std::string path = dir + signing_file;
  if (files::secret::exists(path)) return make_error(errc::already_exists, "an anchor signing key exists: " + path);
  pkey_ptr k(EVP_PKEY_Q_keygen(nullptr, nullptr, "ED25519"), EVP_PKEY_free);
  if (!k) die("Ed25519 keygen");
  bio_ptr priv(BIO_new(BIO_s_mem()), BIO_free), pub(BIO_new(BIO_s_mem()), BIO_free);
  if (!priv || !pub || PEM_write_bio_PrivateKey(priv.get(), k.get(), nullptr, nullptr, 0, nullptr, nullptr) != 1 ||
      PEM_write_bio_PUBKEY(pub.get(), k.get()) != 1)
    die("PEM_write");
  std::string raw = raw_public(k.get());
  // The public half first: a crash in between leaves a harmless public key.
  const std::string pub_path = dir + "/anchor-" + key_id_of(raw) + ".pub";
  if (auto s = files::secret::create_exclusive(pub_path, bio_text(pub.get()), 0644); !s) return s.err();
  std::string pem = bio_text(priv.get());
  auto s = files::secret::create_exclusive(path, pem, 0600);
  OPENSSL_cleanse(pem.data(), pem.size());
  if (!s) {
    std::error_code ec;
    std::filesystem::remove(pub_path, ec);
    return s.err();
  }
  auto holder = std::make_shared<pkey>();
  holder->p = k.release();
  return anchor_signer(std::move(holder), std::move(raw));
}

result<anchor_signer> anchor_signer::load_or_generate(const std::string& dir) {
  auto k = load(dir);
  if (k.ok() || k.code() != errc::not_found) return k;
  auto g = generate(dir);
  if (g.code() == errc::already_exists) return load(dir);  // another process won the race
  return g;
}

checkpoint anchor_signer::sign(std::uint64_t seq, const hash32& row_hash, std::int64_t unix_ns) const {
  checkpoint c{.seq = seq, .row_hash = row_hash, .unix_ns = unix_ns, .key_id = key_id_, .signature = {}};
  std::string msg = signed_message(c);
  md_ctx_ptr m(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  c.signature.assign(64, '\0');
  std::size_t len = c.signature.size();
  if (!m || EVP_DigestSignInit(m.get(), nullptr, nullptr, nullptr, key_->p) != 1 ||
      EVP_DigestSign(m.get(), reinterpret_cast<unsigned char*>(c.signature.data()), &len,
                     reinterpret_cast<const unsigned char*>(msg.data()), msg.size()) != 1 ||
      len != 64)
    die("Ed25519 sign");
  return c;
}

struct anchor_keys::pkey {
  EVP_PKEY* p = nullptr;
  ~pkey() { EVP_PKEY_free(p); }
};

result<anchor_keys> anchor_keys::load(const std::string& dir) {
  anchor_keys out;
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) return out;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind("anchor-", 0) != 0 || name.size() < 12 || name.substr(name.size() - 4) != ".pub") continue;
    auto pem = files::read_file(e.path().string());
    if (!pem) return pem.err();
    pkey_ptr k = read_pem(*pem, false);
    if (!k) return make_error(errc::corruption, e.path().string() + " is not a PEM Ed25519 public key");
    if (auto s = out.add(raw_public(k.get())); !s) return s.err();
  }
  if (ec) return make_error(errc::unavailable, "cannot list " + dir + ": " + ec.message());
  return out;
}

status anchor_keys::add(std::string_view public_raw) {
  if (public_raw.size() != 32) return make_error(errc::invalid_argument, "an Ed25519 public key has 32 bytes");
  EVP_PKEY* k = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, nullptr,
                                            reinterpret_cast<const unsigned char*>(public_raw.data()), 32);
  if (!k) return make_error(errc::invalid_argument, "not an Ed25519 public key");
  auto holder = std::make_shared<pkey>();
  holder->p = k;
  keys_[key_id_of(public_raw)] = std::move(holder);
  return ok_status();
}

status anchor_keys::verify(const checkpoint& c) const {
  auto it = keys_.find(c.key_id);
  if (it == keys_.end())
    return make_error(errc::unauthenticated, "is signed by unknown key '" + c.key_id + "' (no anchor-" + c.key_id +
                                                 ".pub among the trusted keys)");
  std::string msg = signed_message(c);
  md_ctx_ptr m(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  if (!m || EVP_DigestVerifyInit(m.get(), nullptr, nullptr, nullptr, it->second->p) != 1) die("Ed25519 verify init");
  int ok = EVP_DigestVerify(m.get(), reinterpret_cast<const unsigned char*>(c.signature.data()), c.signature.size(),
                            reinterpret_cast<const unsigned char*>(msg.data()), msg.size());
  if (ok != 1) return make_error(errc::unauthenticated, "has an invalid signature for key '" + c.key_id + "'");
  return ok_status();
}

bool anchor_policy::due(std::uint64_t anchored_seq, std::int64_t anchored_unix_ns, std::uint64_t tail_seq,
                        std::int64_t now_unix_ns) const {
  if (tail_seq <= anchored_seq) return false;
  if (tail_seq - anchored_seq >= every_records) return true;
  return now_unix_ns - anchored_unix_ns >= every.count();
}

}  // namespace loom::auditchain
