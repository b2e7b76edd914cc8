#include "libs/store/testing.hpp"

#include "libs/store/identifier.hpp"

#include <pqxx/pqxx>

#include <cstdio>
#include <cstdlib>
#include <unistd.h>

namespace loom::store::testing {
namespace {

std::string temp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t != nullptr && *t != '\0' ? t : "/tmp";
}

void remove_sqlite(const std::string& file) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::remove((file + suffix).c_str());
}

status run_script(const std::string& args) {
  std::string cmd = "sh '" LOOM_STORE_PG_SCRIPT "' " + args + " 1>&2";
  int rc = std::system(cmd.c_str());
  if (rc == 0) return ok_status();
  return make_error(errc::unavailable, "'" + cmd + "' failed (status " + std::to_string(rc) + ")");
}

}  // namespace

result<scratch> scratch::make(backend b, const std::string& name) {
  if (!is_identifier(name) || name.size() > 40) {
    return make_error(errc::invalid_argument, "scratch name '" + name + "' must be a plain name of at most 40 characters");
  }
  if (b == backend::sqlite) {
    std::string file = temp_dir() + "/loom-store-" + name + "-" + std::to_string(::getpid()) + ".db";
    remove_sqlite(file);
    return scratch(file, file);
  }
  const char* admin = std::getenv("LOOM_TEST_DATABASE_URL");
  if (admin == nullptr || *admin == '\0') {
    return make_error(errc::unavailable,
                      "LOOM_TEST_DATABASE_URL is not set: run the PostgreSQL tests through ctest, whose fixture "
                      "store_pg_start starts a throwaway server (scripts/pg_throwaway.sh)");
  }
  std::string url = admin;
  auto slash = url.find('/', url.find("://") + 3);
  if (slash == std::string::npos) return make_error(errc::invalid_argument, "LOOM_TEST_DATABASE_URL needs /<db>");
  auto query = url.find('?', slash);
  // The pid keeps test binaries that pick the same name apart (they share one cluster).
  const std::string db = "loom_" + name + "_" + std::to_string(::getpid());
  std::string made = url.substr(0, slash + 1) + db + (query == std::string::npos ? "" : url.substr(query));
  try {
    pqxx::connection c{url};
    pqxx::nontransaction n{c};
    n.exec0("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
    n.exec0("CREATE DATABASE " + db);
  } catch (const std::exception& e) {
    return make_error(errc::unavailable, "cannot make scratch database " + db + " on " + mask_url(url) + ": " +
                                             e.what());
  }
  return scratch(made, "");
}

scratch::~scratch() {
  if (!file_.empty()) remove_sqlite(file_);
}

status start_cluster(int port, bool durable) {
  return run_script("start " + std::to_string(port) + (durable ? " durable" : ""));
}

status stop_cluster(int port) { return run_script("stop " + std::to_string(port)); }

std::string cluster_url(int port, const std::string& db) {
  return "postgresql://postgres@127.0.0.1:" + std::to_string(port) + "/" + db;
}

}  // namespace loom::store::testing
