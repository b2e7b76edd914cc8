// Support for loom::store's tests and benchmark (never linked into services):
// a scratch database per test on either engine, and a throwaway PostgreSQL
// cluster driven through scripts/pg_throwaway.sh. PostgreSQL scratch databases
// are made on the server named by $LOOM_TEST_DATABASE_URL (the CTest fixture
// store_pg_start sets it); without it they fail, they never skip.
// Single-threaded use.
#pragma once

#include "libs/status/status.hpp"
#include "libs/store/database.hpp"

#include <string>

namespace loom::store::testing {

// The engine a suite binary was built for: loom_store_test_exe(... BACKEND
// sqlite|postgres) defines LOOM_STORE_TEST_BACKEND_<engine> for its sources.
#if defined(LOOM_STORE_TEST_BACKEND_postgres)
inline constexpr backend suite_backend = backend::postgres;
#else
inline constexpr backend suite_backend = backend::sqlite;
#endif

// A fresh, empty database named after `name` (a plain identifier, ≤ 40 chars):
//   sqlite:   ${TMPDIR:-/tmp}/loom-store-<name>-<pid>.db (removed with its -wal/-shm)
//   postgres: database loom_<name>_<pid> on $LOOM_TEST_DATABASE_URL's server
//             (dropped and re-created; left for the cluster's teardown).
class scratch {
 public:
  static result<scratch> make(backend b, const std::string& name);
  scratch(scratch&& o) noexcept : url_(std::move(o.url_)), file_(std::move(o.file_)) { o.file_.clear(); }
  scratch(const scratch&) = delete;
  scratch& operator=(const scratch&) = delete;
  scratch& operator=(scratch&&) = delete;
  ~scratch();

  const std::string& url() const { return url_; }

 private:
  scratch(std::string url, std::string file) : url_(std::move(url)), file_(std::move(file)) {}
  std::string url_;
  std::string file_;  // SQLite file to remove, if any
};

// scripts/pg_throwaway.sh start|stop PORT [durable]; the script's output goes to stderr.
status start_cluster(int port, bool durable);
status stop_cluster(int port);
// postgresql://postgres@127.0.0.1:PORT/<db>
std::string cluster_url(int port, const std::string& db = "postgres");

}  // namespace loom::store::testing
