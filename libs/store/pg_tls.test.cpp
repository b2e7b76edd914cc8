// TLS to PostgreSQL (issue 32 item 4) against a real cluster that takes TLS 1.3
// only (scripts/pg_throwaway.sh PORT tls, fixture store_pg_tls): verify-full
// with the throwaway CA connects over TLS 1.3; a plaintext URL, a wrong CA, a
// wrong host name and a client held to TLS 1.2 are each refused at once (not
// retried) with an error that says which. And the URL libpq is given asks for
// TLS 1.3 itself whenever TLS is asked for.
#include "libs/store/connection.hpp"
#include "libs/store/database.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace loom;
using namespace loom::store;

namespace {

std::string port() {
  const char* p = std::getenv("LOOM_TEST_PG_TLS_PORT");
  return p ? p : "";
}
// Where pg_throwaway.sh put the CA (it writes under ${TMPDIR:-/tmp}).
std::string tls_dir() {
  const char* t = std::getenv("TMPDIR");
  return std::string(t && *t ? t : "/tmp") + "/loom-pg-" + port() + "/tls";
}
std::string url(const std::string& host, const std::string& params) {
  return "postgresql://postgres@" + host + ":" + port() + "/postgres?" + params;
}
std::string verify_full(const std::string& ca, const std::string& host = "127.0.0.1") {
  return url(host, "sslmode=verify-full&sslrootcert=" + tls_dir() + "/" + ca);
}

}  // namespace

TEST_CASE("the URL libpq gets: TLS 1.3 at least whenever TLS is asked for, a connect timeout, the caller's own choices kept") {
  using detail::with_connect_defaults;
  CHECK(with_connect_defaults("postgresql://h/db") == "postgresql://h/db?connect_timeout=5");
  CHECK(with_connect_defaults("postgresql://h/db?sslmode=verify-full&sslrootcert=/ca.crt") ==
        "postgresql://h/db?sslmode=verify-full&sslrootcert=/ca.crt&connect_timeout=5&ssl_min_protocol_version=TLSv1.3");
  CHECK(with_connect_defaults("postgresql://h/db?sslmode=require") ==
        "postgresql://h/db?sslmode=require&connect_timeout=5&ssl_min_protocol_version=TLSv1.3");
  // Named by the caller: kept as given.
  CHECK(with_connect_defaults("postgresql://h/db?sslmode=verify-ca&ssl_min_protocol_version=TLSv1.2&connect_timeout=9") ==
        "postgresql://h/db?sslmode=verify-ca&ssl_min_protocol_version=TLSv1.2&connect_timeout=9");
  // No TLS asked for: no TLS parameter added (sslmode=disable / prefer stay the caller's choice).
  CHECK(with_connect_defaults("postgresql://h/db?sslmode=disable") == "postgresql://h/db?sslmode=disable&connect_timeout=5");
  // A parameter's name inside another's value is not that parameter.
  CHECK(with_connect_defaults("postgresql://h/db?application_name=xconnect_timeout=1").ends_with("&connect_timeout=5"));
}

TEST_CASE("verify-full with the cluster's CA connects over TLS 1.3") {
  REQUIRE(!port().empty());
  auto db = database::open(verify_full("ca.crt"));
  REQUIRE_MESSAGE(db.ok(), db.err().message);
  auto seen = (*db)->with_transaction([](transaction& tx) -> result<std::string> {
    auto rows = tx.query("SELECT CASE WHEN ssl THEN 1 ELSE 0 END AS tls, version FROM pg_stat_ssl "
                         "WHERE pid = pg_backend_pid()");
    if (!rows.ok()) return rows.err();
    if (rows->size() != 1) return make_error(errc::internal, "no pg_stat_ssl row for this backend");
    auto tls = (*rows)[0].get_i64("tls");
    auto version = (*rows)[0].get_text("version");
    if (!tls.ok() || !version.ok()) return make_error(errc::internal, "pg_stat_ssl: unexpected columns");
    return (*tls == 1 ? std::string("tls ") : std::string("plain ")) + *version;
  });
  REQUIRE_MESSAGE(seen.ok(), seen.err().message);
  CHECK(*seen == "tls TLSv1.3");
  // localhost is on the certificate too.
  auto by_name = database::open(verify_full("ca.crt", "localhost"));
  CHECK_MESSAGE(by_name.ok(), by_name.err().message);
}

TEST_CASE("a plaintext connection, a wrong CA, a wrong host name and TLS 1.2 are refused at once, each saying why") {
  REQUIRE(!port().empty());
  struct refusal {
    const char* what;
    std::string url;
    const char* says;
  };
  const refusal cases[] = {
      {"plaintext", url("127.0.0.1", "sslmode=disable"), "the server takes only TLS connections"},
      {"wrong CA", verify_full("other-ca.crt"), "does not verify against the URL's sslrootcert"},
      // Reached at 127.0.0.1 (hostaddr), checked against the name it was asked for: not on the certificate.
      {"wrong host", url("db.invalid", "hostaddr=127.0.0.1&sslmode=verify-full&sslrootcert=" + tls_dir() + "/ca.crt"),
       "names another host"},
      {"TLS 1.2", url("127.0.0.1", "sslmode=verify-full&sslrootcert=" + tls_dir() + "/ca.crt&ssl_max_protocol_version=TLSv1.2"),
       "no TLS version both sides take"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    // open_with_retry gives up at once: none of these fixes itself.
    auto db = database::open_with_retry(c.url, std::chrono::steady_clock::now() + std::chrono::seconds(30));
    REQUIRE(!db.ok());
    INFO(db.err().message);
    CHECK(db.code() != errc::unavailable);
    CHECK(db.err().message.find(c.says) != std::string::npos);
    CHECK(db.err().message.find("gave up after") == std::string::npos);
  }
  // A CA file that is not there: named.
  auto missing = database::open(verify_full("no-such-ca.crt"));
  REQUIRE(!missing.ok());
  CHECK(missing.err().message.find("no-such-ca.crt") != std::string::npos);
}
