#include "services/ingest/importer/staging.hpp"

#include "libs/files/temp_dir.hpp"
#include "services/ingest/importer/testing.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <set>

using namespace loom;
using namespace loom::ingest;
using ingest::importer_testing::slurp;
using ingest::importer_testing::write_file;
namespace fs = std::filesystem;

namespace {

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.insert(e.path().filename().string());
  return out;
}

}  // namespace

TEST_CASE("a staged version is published by rename, replaced by exchange, and dropped when abandoned") {
  files::temp_dir t("loom-staging");
  const std::string root = t.path();
  {
    auto s = staging::begin(root, "d", "00000000000000a1");
    REQUIRE(s.ok());
    CHECK(fs::is_directory(s->dir()));
    CHECK(fs::is_directory(s->work_dir()));
    write_file(s->dir() + "/f", "v1");
    write_file(s->work_dir() + "/scratch", "x");
    REQUIRE(s->publish().ok());
  }
  CHECK(slurp(root + "/d/f") == "v1");
  CHECK(entries(root + "/.staging") == std::set<std::string>{"d.lock"});
  {
    auto s = staging::begin(root, "d", "00000000000000a2");
    REQUIRE(s.ok());
    write_file(s->dir() + "/g", "v2");
    REQUIRE(s->publish().ok());
  }
  CHECK(entries(root + "/d") == std::set<std::string>{"g"});
  CHECK(entries(root + "/.staging") == std::set<std::string>{"d.lock"});
  {
    auto s = staging::begin(root, "d", "00000000000000a3");
    REQUIRE(s.ok());
    write_file(s->dir() + "/h", "v3");
  }  // not published
  CHECK(entries(root + "/d") == std::set<std::string>{"g"});
  CHECK(entries(root + "/.staging") == std::set<std::string>{"d.lock"});
}

TEST_CASE("one import per name at a time, and names that share a prefix do not touch each other") {
  files::temp_dir t("loom-staging");
  auto a = staging::begin(t.path(), "a", "0000000000000001");
  REQUIRE(a.ok());
  auto again = staging::begin(t.path(), "a", "0000000000000002");
  CHECK(again.code() == errc::conflict);
  auto ab = staging::begin(t.path(), "a.b", "0000000000000003");  // "a.b.<id>" is not a leftover of "a"
  REQUIRE(ab.ok());
  CHECK(fs::is_directory(a->dir()));
  CHECK(fs::is_directory(ab->dir()));
}

TEST_CASE("what a crash leaves behind is repaired: leftovers go, a half-done fallback swap is undone") {
  files::temp_dir t("loom-staging");
  const std::string root = t.path();
  // A crash after "rename old -> .old" and before "rename new -> d": d is missing.
  write_file(root + "/.staging/d.00000000000000b1.old/f", "old");
  write_file(root + "/.staging/d.00000000000000b1/f", "new, complete but unpublished");
  write_file(root + "/.staging/d.00000000000000b0.work/run", "scratch");
  write_file(root + "/.staging/other.00000000000000b1/f", "another dataset's import");
  {
    auto s = staging::begin(root, "d", "00000000000000b2");
    REQUIRE(s.ok());
    CHECK(slurp(root + "/d/f") == "old");
    CHECK(entries(root + "/.staging") ==
          std::set<std::string>{"d.lock", "d.00000000000000b2", "d.00000000000000b2.work", "other.00000000000000b1"});
  }
  CHECK(slurp(root + "/d/f") == "old");
}

TEST_CASE("start-up cleaning removes every crashed import's leftovers but not those of a running import") {
  files::temp_dir t("loom-staging");
  const std::string root = t.path();
  auto live = staging::begin(root, "live", "00000000000000c1");  // holds the lock of "live"
  REQUIRE(live.ok());
  write_file(live->work_dir() + "/run", "in use");
  write_file(root + "/.staging/a.00000000000000c2/f", "killed mid-write");
  write_file(root + "/.staging/a.00000000000000c2.work/pass1.spill", "scratch");
  write_file(root + "/.staging/b.c.00000000000000c3.work/run", "scratch of dataset b.c");
  // A crash half-way through a fallback publish: d is missing, its old version in .old.
  write_file(root + "/.staging/d.00000000000000c4.old/f", "old");
  write_file(root + "/.staging/README", "not an import's");
  auto removed = clean_stale(root);
  REQUIRE(removed.ok());
  CHECK(std::set<std::string>(removed->begin(), removed->end()) ==
        std::set<std::string>{"a.00000000000000c2", "a.00000000000000c2.work", "b.c.00000000000000c3.work"});
  CHECK(slurp(root + "/d/f") == "old");  // restored, not removed
  CHECK(entries(root + "/.staging") ==
        std::set<std::string>{"live.lock", "live.00000000000000c1", "live.00000000000000c1.work", "a.lock", "b.c.lock",
                              "d.lock", "README"});
  CHECK(slurp(live->work_dir() + "/run") == "in use");
  CHECK(clean_stale(t.path() + "/nowhere")->empty());  // no .staging yet: nothing to do
}

TEST_CASE("a staging area that cannot be listed is an error naming it, not an empty one") {
  files::temp_dir t("loom-staging");
  const std::string root = t.path();
  write_file(root + "/.staging", "not a directory");
  const std::string want = "list " + root + "/.staging: Not a directory";
  auto rec = recover(root, "d");  // was ok: a previous version there would have been missed
  REQUIRE_FALSE(rec.ok());
  CHECK(rec.err().message == want);
  auto cleaned = clean_stale(root);
  REQUIRE_FALSE(cleaned.ok());
  CHECK(cleaned.err().message == want);
}
