#include "services/console/tls.hpp"

#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/stat.h>

using namespace loom::console;

namespace {
std::string temp_dir() {
  std::string t = "/tmp/console-tls-XXXXXX";
  REQUIRE(::mkdtemp(t.data()) != nullptr);
  return t;
}
}  // namespace

TEST_CASE("the console makes its certificate once, keeps the key private and reuses it on the next start") {
  const auto dir = temp_dir();
  auto a = ensure_certificate("", "", dir + "/tls", {"localhost", "127.0.0.1", "::1", "edge.example"});
  REQUIRE(a);
  CHECK(a->generated);
  struct stat st {};
  REQUIRE(::stat(a->key.c_str(), &st) == 0);
  CHECK((st.st_mode & 077) == 0);
  auto fp1 = fingerprint(a->cert);
  REQUIRE(fp1);
  CHECK(fp1->size() == 32 * 3 - 1);
  auto b = ensure_certificate("", "", dir + "/tls", {"localhost"});
  REQUIRE(b);
  CHECK_FALSE(b->generated);
  CHECK(*fingerprint(b->cert) == *fp1);
  // The SANs name every host given.
  auto pem = loom::files::read_file(a->cert);
  REQUIRE(pem);
  BIO* bio = BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size()));
  X509* x = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  REQUIRE(x != nullptr);
  CHECK(X509_check_host(x, "edge.example", 0, 0, nullptr) == 1);
  CHECK(X509_check_ip_asc(x, "127.0.0.1", 0) == 1);
  CHECK(X509_check_host(x, "other.example", 0, 0, nullptr) != 1);
  X509_free(x);
  BIO_free(bio);
  std::filesystem::remove_all(dir);
}

TEST_CASE("a console TLS context refuses anything older than TLS 1.3, and a key of another certificate") {
  const auto dir = temp_dir();
  auto a = ensure_certificate("", "", dir + "/a", {"localhost"});
  auto b = ensure_certificate("", "", dir + "/b", {"localhost"});
  REQUIRE(a);
  REQUIRE(b);
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  std::string why;
  REQUIRE(configure_tls13(*ctx, *a, why));
  CHECK(SSL_CTX_get_min_proto_version(ctx) == TLS1_3_VERSION);
  SSL_CTX_free(ctx);
  auto mixed = ensure_certificate(a->cert, b->key, dir, {});
  REQUIRE_FALSE(mixed);
  CHECK(mixed.err().message.find(b->key) != std::string::npos);  // names the key that does not fit
  CHECK(ensure_certificate(dir + "/none.pem", b->key, dir, {}).code() == loom::errc::invalid_argument);
  std::filesystem::remove_all(dir);
}
