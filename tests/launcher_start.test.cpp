// Cross-process: what `loom up` does when a service cannot start — a
// truncated store, a key file others can read — and the modes of what it
// creates: the data dir and everything in it private to the owner.
#include "tests/support/harness.hpp"

#include "libs/layout/layout.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

using namespace loom::test;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {
unsigned mode_of(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 ? static_cast<unsigned>(st.st_mode & 07777) : 0xffff;
}
}  // namespace

TEST_CASE("loom up on a truncated store names the failing service and its error, stops everything and exits 1") {
  temp_dir home("loom-truncated");
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"up"}, 60s).code == 0);
  REQUIRE(run_loom(home.path(), {"down"}, 60s).code == 0);
  const std::string db = home.path() + "/loom.db";
  REQUIRE(fs::file_size(db) > 8192);
  fs::resize_file(db, 4096);  // a torn copy: the header survives, the schema pages do not
  fs::remove(db + "-wal");
  fs::remove(db + "-shm");

  auto t0 = std::chrono::steady_clock::now();
  auto up = run_loom(home.path(), {"up", "--wait", "120"}, 150s);
  auto took = std::chrono::steady_clock::now() - t0;
  INFO("up stdout: " << up.out << "\nup stderr: " << up.err);
  CHECK(up.code == 1);
  CHECK(took < 60s);  // reported once a service failed twice, not after --wait
  CHECK(up.err.find("cannot start: it exited with 1") != std::string::npos);
  CHECK(up.err.find("state store") != std::string::npos);  // the service's own words, from its log
  CHECK(up.err.find("stopped EdgeLoom") != std::string::npos);
  CHECK(up.err.find("not all services became healthy") == std::string::npos);
  // One line per line: the service's last output indented under it, no escaped "\n".
  CHECK(up.err.find("\\n") == std::string::npos);
  CHECK(up.err.find("Its last output:\n  ") != std::string::npos);
  CHECK(up.err.find("\nstopped EdgeLoom in ") != std::string::npos);
  // Nothing is left running or crash-looping, and the data dir is free again.
  std::this_thread::sleep_for(500ms);
  CHECK(processes_of(home.path()).empty());
  auto down = run_loom(home.path(), {"down"});
  CHECK(down.code == 0);
  CHECK(down.out.find("not running") != std::string::npos);
}

TEST_CASE("loom up refuses a key file others can read and says which and how to fix it") {
  temp_dir home("loom-keymode");
  up_guard guard{home.path()};
  REQUIRE(run_loom(home.path(), {"keys", "init"}).code == 0);
  const std::string key = home.path() + "/keys/token.key";
  REQUIRE(::chmod(key.c_str(), 0644) == 0);
  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  CHECK(up.code == 1);
  CHECK(up.err.find(key + " (mode 0644)") != std::string::npos);
  CHECK(up.err.find("chmod 600 " + key) != std::string::npos);
  CHECK(processes_of(home.path()).empty());  // refused before anything started
  CHECK(mode_of(key) == 0644);               // and not "fixed" behind the owner's back

  REQUIRE(::chmod(key.c_str(), 0600) == 0);
  const std::string curve = home.path() + "/keys/curve/ingest.key";
  REQUIRE(::chmod(curve.c_str(), 0640) == 0);
  up = run_loom(home.path(), {"up"}, 60s);
  CHECK(up.code == 1);
  CHECK(up.err.find(curve + " (mode 0640)") != std::string::npos);
}

TEST_CASE("loom up makes the data dir and everything in it private to the owner, an existing dir too") {
  temp_dir home("loom-modes");
  up_guard guard{home.path()};
  REQUIRE(::chmod(home.path().c_str(), 0755) == 0);  // as an older `loom up` left it
  auto up = run_loom(home.path(), {"up"}, 60s);
  INFO("up: " << up.out << up.err);
  REQUIRE(up.code == 0);
  CHECK(mode_of(home.path()) == 0700);
  REQUIRE(run_loom(home.path(), {"down"}, 60s).code == 0);
  for (const char* f : {"loom.db", "endpoints.json", "admin.token", "logs/watcher.log", "logs/scheduler.log",
                        "keys/token.key", "keys/checkpoint.key", "keys/epoch"}) {
    if (std::string(f) == "keys/epoch" && !fs::exists(home.path() + "/" + f)) continue;
    INFO(f);
    CHECK(mode_of(home.path() + "/" + f) == 0600);
  }
  // Nothing anywhere under it is open to group or others.
  int checked = 0;
  for (auto& e : fs::recursive_directory_iterator(home.path())) {
    if (e.is_symlink()) continue;
    INFO(e.path().string() << " mode " << std::oct << mode_of(e.path().string()));
    CHECK((mode_of(e.path().string()) & 077) == 0);
    ++checked;
  }
  CHECK(checked > 20);
}
