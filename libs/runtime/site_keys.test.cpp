#include "libs/runtime/site_keys.hpp"

#include "libs/files/files.hpp"
#include "libs/wire/curve.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <stdlib.h>
#include <sys/stat.h>

namespace {
struct tmp_dir {
  std::string path;
  tmp_dir() {
    char t[] = "/tmp/loom-site-keys-XXXXXX";
    path = ::mkdtemp(t);
  }
  ~tmp_dir() { std::filesystem::remove_all(path); }
};
std::string a_key() { return loom::wire::generate_keypair().public_z85; }
}  // namespace

TEST_CASE("site keys become exactly one file per key, and a revoked site's file goes") {
  tmp_dir t;
  const std::string dir = t.path + "/keys/sites";
  const auto k1 = a_key(), k2 = a_key();
  bool changed = false;
  REQUIRE(loom::runtime::write_site_keys(dir, {{"north", "trainer", k1}, {"south", "trainer", k2}}, &changed).ok());
  CHECK(changed);
  CHECK(*loom::files::read_file(dir + "/north.trainer.pub") == k1 + "\n");
  struct stat st {};
  REQUIRE(::stat((dir + "/south.trainer.pub").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  // The same keys again: nothing to write.
  REQUIRE(loom::runtime::write_site_keys(dir, {{"north", "trainer", k1}, {"south", "trainer", k2}}, &changed).ok());
  CHECK_FALSE(changed);
  // South revoked: its file goes, north's stays; a stray file goes too.
  REQUIRE(loom::files::write_atomic(dir + "/stray.pub", "x\n", 0600).ok());
  REQUIRE(loom::runtime::write_site_keys(dir, {{"north", "trainer", k1}}, &changed).ok());
  CHECK(changed);
  CHECK_FALSE(std::filesystem::exists(dir + "/south.trainer.pub"));
  CHECK_FALSE(std::filesystem::exists(dir + "/stray.pub"));
  CHECK(std::filesystem::exists(dir + "/north.trainer.pub"));
}

TEST_CASE("a malformed site key list names the entry and touches nothing") {
  tmp_dir t;
  const std::string dir = t.path + "/sites";
  const auto k = a_key();
  REQUIRE(loom::runtime::write_site_keys(dir, {{"north", "trainer", k}}).ok());
  struct bad_case {
    loom::runtime::site_key entry;
    const char* says;
  };
  for (const auto& b : {bad_case{{"north", "trainer", "not-a-key"}, "not a CURVE public key"},
                        bad_case{{"../etc", "trainer", k}, "../etc"},
                        bad_case{{"north", "train/er", k}, "service name"},
                        bad_case{{"north", "", k}, "1..32"}}) {
    CAPTURE(b.says);
    auto st = loom::runtime::write_site_keys(dir, {b.entry});
    REQUIRE_FALSE(st.ok());
    CHECK(st.code() == loom::errc::invalid_argument);
    CHECK(st.err().message.find(b.says) != std::string::npos);
    CHECK(*loom::files::read_file(dir + "/north.trainer.pub") == k + "\n");  // nothing removed
  }
  auto twice = loom::runtime::write_site_keys(dir, {{"north", "trainer", k}, {"north", "trainer", a_key()}});
  CHECK(twice.code() == loom::errc::invalid_argument);
  CHECK(twice.err().message.find("named twice") != std::string::npos);
}
