#include "services/console/tls.hpp"

#include "libs/files/files.hpp"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <sys/stat.h>

#include <cstdio>
#include <functional>
#include <memory>

namespace loom::console {
namespace {

std::string ssl_error() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

struct bio_free {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct pkey_free {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
struct x509_free {
  void operator()(X509* x) const { X509_free(x); }
};
using pkey_ptr = std::unique_ptr<EVP_PKEY, pkey_free>;
using x509_ptr = std::unique_ptr<X509, x509_free>;

bool exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

result<std::string> pem_of(const std::function<int(BIO*)>& write) {
  std::unique_ptr<BIO, bio_free> b(BIO_new(BIO_s_mem()));
  if (!b || write(b.get()) != 1) return make_error(errc::internal, "writing PEM: " + ssl_error());
  char* data = nullptr;
  long n = BIO_get_mem_data(b.get(), &data);
  return std::string(data, static_cast<std::size_t>(n));
}

// "IP:1.2.3.4" for an address, "DNS:name" otherwise.
std::string san_entry(const std::string& host) {
  unsigned char buf[16];
  if (inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1) return "IP:" + host;
  return "DNS:" + host;
}

status generate(const std::string& cert_path, const std::string& key_path, const std::vector<std::string>& hosts) {
  pkey_ptr key(EVP_EC_gen("P-256"));
  if (!key) return make_error(errc::internal, "making the console's key: " + ssl_error());
  x509_ptr x(X509_new());
  if (!x) return make_error(errc::internal, "making the console's certificate: " + ssl_error());
  X509_set_version(x.get(), 2);
  const std::string serial = [] {
    unsigned char b[16];
    std::FILE* f = std::fopen("/dev/urandom", "rb");
    if (f) {
      if (std::fread(b, 1, sizeof b, f) != sizeof b) b[0] = 1;
      std::fclose(f);
    }
    b[0] &= 0x7f;
    return std::string(reinterpret_cast<char*>(b), sizeof b);
  }();
  BIGNUM* bn = BN_bin2bn(reinterpret_cast<const unsigned char*>(serial.data()), static_cast<int>(serial.size()), nullptr);
  BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(x.get()));
  BN_free(bn);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -60);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), 365L * 24 * 3600);
  X509_set_pubkey(x.get(), key.get());
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("EdgeLoom"), -1, -1, 0);
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>("loom-console"), -1, -1,
                             0);
  X509_set_issuer_name(x.get(), name);
  std::string san;
  for (const auto& h : hosts) san += (san.empty() ? "" : ",") + san_entry(h);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x.get(), x.get(), nullptr, nullptr, 0);
  for (const auto& [nid, value] : std::vector<std::pair<int, std::string>>{
           {NID_subject_alt_name, san},
           {NID_basic_constraints, "critical,CA:FALSE"},
           {NID_key_usage, "critical,digitalSignature"},
           {NID_ext_key_usage, "serverAuth"}}) {
    X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &v3, nid, value.c_str());
    if (!ext) return make_error(errc::internal, "certificate extension " + value + ": " + ssl_error());
    X509_add_ext(x.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  if (X509_sign(x.get(), key.get(), EVP_sha256()) == 0)
    return make_error(errc::internal, "signing the console's certificate: " + ssl_error());
  auto key_pem = pem_of([&](BIO* b) {
    return PEM_write_bio_PrivateKey(b, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  });
  if (!key_pem) return key_pem.err();
  auto cert_pem = pem_of([&](BIO* b) { return PEM_write_bio_X509(b, x.get()); });
  if (!cert_pem) return cert_pem.err();
  if (auto st = files::write_atomic(key_path, *key_pem, 0600); !st) return st;
  return files::write_atomic(cert_path, *cert_pem, 0644);
}

result<x509_ptr> read_cert(const std::string& path) {
  auto text = files::read_file(path);
  if (!text) return text.err();
  std::unique_ptr<BIO, bio_free> b(BIO_new_mem_buf(text->data(), static_cast<int>(text->size())));
  x509_ptr x(PEM_read_bio_X509(b.get(), nullptr, nullptr, nullptr));
  if (!x) return make_error(errc::invalid_argument, path + " holds no PEM certificate: " + ssl_error());
  return x;
}

}  // namespace

result<cert_files> ensure_certificate(const std::string& cert, const std::string& key, const std::string& dir,
                                      const std::vector<std::string>& hosts) {
  if (cert.empty() != key.empty())
    return make_error(errc::invalid_argument, "give both --cert and --cert-key, or neither (a generated pair)");
  cert_files out{cert, key, false};
  if (cert.empty()) {
    out.cert = dir + "/cert.pem";
    out.key = dir + "/key.pem";
    if (!exists(out.cert) || !exists(out.key)) {
      if (auto st = files::make_dirs(dir, 0700); !st) return st.err();
      if (auto st = generate(out.cert, out.key, hosts); !st) return st.err();
      out.generated = true;
    }
  }
  // Check the pair loads and matches now: a start-up error names the files.
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()), &SSL_CTX_free);
  std::string why;
  if (!ctx || !configure_tls13(*ctx, out, why)) return make_error(errc::invalid_argument, why);
  return out;
}

result<std::string> fingerprint(const std::string& cert_path) {
  auto x = read_cert(cert_path);
  if (!x) return x.err();
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (X509_digest(x->get(), EVP_sha256(), md, &n) != 1) return make_error(errc::internal, ssl_error());
  std::string out;
  char buf[4];
  for (unsigned i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, i ? ":%02X" : "%02X", md[i]);
    out += buf;
  }
  return out;
}

bool configure_tls13(SSL_CTX& ctx, const cert_files& files, std::string& why) {
  if (SSL_CTX_set_min_proto_version(&ctx, TLS1_3_VERSION) != 1) {
    why = "TLS 1.3 is not available: " + ssl_error();
    return false;
  }
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(&ctx, files.cert.c_str()) != 1) {
    why = "the console's certificate " + files.cert + ": " + ssl_error();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    why = "the console's key " + files.key + ": " + ssl_error();
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    why = files.key + " is not the key of " + files.cert;
    return false;
  }
  return true;
}

}  // namespace loom::console
