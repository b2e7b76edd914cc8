// auditchain::store_url: where the audit service and `loom audit verify`
// find the chain (its own audit.db; a data dir from before keeps loom.db).
#include "libs/auditchain/store_io.hpp"

#include "libs/files/temp_dir.hpp"
#include "libs/store/database.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

using namespace loom;

namespace {
// Unsets $LOOM_DATABASE_URL for one test case and restores it afterwards.
struct no_database_url {
  std::optional<std::string> saved;
  no_database_url() {
    if (const char* v = std::getenv("LOOM_DATABASE_URL")) saved = v;
    ::unsetenv("LOOM_DATABASE_URL");
  }
  ~no_database_url() {
    if (saved) ::setenv("LOOM_DATABASE_URL", saved->c_str(), 1);
  }
};

void make_db(const std::string& path, const std::string& ddl) {
  auto db = store::database::open(path);
  REQUIRE(db.ok());
  auto st = (*db)->with_transaction([&](store::transaction& tx) { return tx.exec_script(ddl); });
  REQUIRE_MESSAGE(st.ok(), st.err().to_string());
}
}  // namespace

TEST_CASE("the audit chain gets its own audit.db, a data dir from before keeps loom.db, and the URL variable wins") {
  no_database_url guard;
  files::temp_dir dir("loom-audit-url");
  const std::string root = dir.path(), own = root + "/audit.db", shared = root + "/loom.db";

  // A new data dir, and one where only the services' loom.db exists: audit.db.
  CHECK(auditchain::store_url(root) == own);
  make_db(shared, "CREATE TABLE jobs (id TEXT PRIMARY KEY)");
  CHECK(auditchain::store_url(root) == own);

  // loom.db already holding the chain and no audit.db: the chain stays where it is.
  make_db(shared, "CREATE TABLE audit_events (seq INTEGER PRIMARY KEY)");
  CHECK(auditchain::store_url(root) == shared);

  // Once audit.db exists it is the chain's, whatever loom.db holds.
  make_db(own, "CREATE TABLE audit_events (seq INTEGER PRIMARY KEY)");
  CHECK(auditchain::store_url(root) == own);

  ::setenv("LOOM_DATABASE_URL", "postgresql://loom@127.0.0.1:5432/loom", 1);
  CHECK(auditchain::store_url(root) == "postgresql://loom@127.0.0.1:5432/loom");
}
