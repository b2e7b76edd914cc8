// Cross-process: a whole deployment on a PostgreSQL that takes TLS 1.3 only
// (issue 32 item 4; the store_pg_tls fixture's cluster, scripts/pg_throwaway.sh
// PORT tls). `loom init --database` with a verify-full URL and the cluster's CA
// connects before saving; `loom up` then starts every service on it — each
// service's own connections go over TLS, seen from the server's side in
// pg_stat_ssl — and the same URL with the wrong CA is refused by init
// before anything is written.
#include "libs/store/database.hpp"
#include "tests/support/harness.hpp"
#include "tests/support/scoped_env.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>

using namespace loom;
using namespace loom::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string tls_url(const std::string& ca) {
  const char* port = std::getenv("LOOM_TEST_PG_TLS_PORT");
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = std::string(tmp && *tmp ? tmp : "/tmp") + "/loom-pg-" + (port ? port : "") + "/tls";
  return std::string("postgresql://postgres@127.0.0.1:") + (port ? port : "") +
         "/postgres?sslmode=verify-full&sslrootcert=" + dir + "/" + ca;
}

// Backends of this cluster other than the caller's own, by TLS and not.
std::pair<std::int64_t, std::int64_t> backends(store::database& db) {
  auto r = db.with_read_transaction([](store::transaction& tx) -> result<std::pair<std::int64_t, std::int64_t>> {
    auto q = tx.query(
        "SELECT COUNT(*) FILTER (WHERE s.ssl AND s.version = 'TLSv1.3') AS tls, COUNT(*) FILTER (WHERE NOT s.ssl) AS plain "
        "FROM pg_stat_ssl s JOIN pg_stat_activity a ON a.pid = s.pid "
        "WHERE a.backend_type = 'client backend' AND s.pid <> pg_backend_pid() AND a.client_addr IS NOT NULL");
    if (!q) return q.err();
    auto tls = (*q)[0].get_i64("tls"), plain = (*q)[0].get_i64("plain");
    if (!tls || !plain) return make_error(errc::internal, "pg_stat_ssl: unexpected columns");
    return std::make_pair(*tls, *plain);
  });
  REQUIRE_MESSAGE(r.ok(), r.err().message);
  return *r;
}

}  // namespace

TEST_CASE("loom init and loom up on a PostgreSQL that takes TLS 1.3 only: every service connects over TLS, a wrong CA is refused before any write") {
  REQUIRE(std::getenv("LOOM_TEST_PG_TLS_PORT"));
  temp_dir scratch("loom-pg-tls");
  const std::string home = scratch.path() + "/fresh";
  up_guard guard{home};

  auto bad = run_loom(home, {"init", "--yes", "--database", tls_url("other-ca.crt")}, 60s);
  INFO(bad.out << bad.err);
  CHECK(bad.code != 0);
  CHECK(bad.err.find("does not verify against the URL's sslrootcert") != std::string::npos);
  CHECK_FALSE(fs::exists(home + "/database.url"));

  auto ok = run_loom(home, {"init", "--yes", "--database", tls_url("ca.crt")}, 60s);
  INFO(ok.out << ok.err);
  REQUIRE(ok.code == 0);
  auto up = [&] {
    scoped_env saved_url_alone("LOOM_DATABASE_URL", nullptr);
    return run_loom(home, {"up"}, 90s);
  }();
  INFO(up.out << up.err);
  REQUIRE(up.code == 0);
  CHECK_FALSE(fs::exists(home + "/loom.db"));

  auto db = store::database::open(tls_url("ca.crt"));
  REQUIRE_MESSAGE(db.ok(), db.err().message);
  // The services hold their connections open: all of them TLS 1.3, none plain.
  std::pair<std::int64_t, std::int64_t> seen{0, 0};
  CHECK(eventually([&] { return (seen = backends(**db)).first >= 2; }, 30s));
  MESSAGE("services' connections: " << seen.first << " over TLS 1.3, " << seen.second << " plain");
  CHECK(seen.second == 0);
  auto nodes = (*db)->with_read_transaction([](store::transaction& tx) -> result<std::int64_t> {
    auto q = tx.query("SELECT COUNT(*) FROM nodes");
    if (!q) return q.err();
    return (*q)[0].get_i64(0);
  });
  REQUIRE_MESSAGE(nodes.ok(), nodes.err().message);
  CHECK(*nodes >= 6);
}
