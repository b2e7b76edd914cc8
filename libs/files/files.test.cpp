#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {
std::string temp_dir() {
  char tmpl[] = "/tmp/loom-files-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  return tmpl;
}
}  // namespace

TEST_CASE("an atomic write replaces the whole file and keeps the mode asked for") {
  auto dir = temp_dir();
  auto path = dir + "/a/b/secret.key";
  REQUIRE(loom::files::make_dirs(dir + "/a/b", 0700).ok());
  REQUIRE(loom::files::write_atomic(path, "first", 0600).ok());
  REQUIRE(loom::files::write_atomic(path, std::string("sec\0ond", 7), 0600).ok());
  auto got = loom::files::read_file(path);
  REQUIRE(got.ok());
  CHECK(*got == std::string("sec\0ond", 7));
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  int leftovers = 0;
  for (auto& e : fs::directory_iterator(dir + "/a/b")) leftovers += e.path().filename() != "secret.key";
  CHECK(leftovers == 0);
  fs::remove_all(dir);
}

TEST_CASE("under umask 077 an atomic write asked for 0644 makes a private file, and never a wider one") {
  auto dir = temp_dir();
  const mode_t old = ::umask(077);
  CHECK(loom::files::masked_mode(0644) == 0600);
  REQUIRE(loom::files::write_atomic(dir + "/data.json", "{}", 0644).ok());
  ::umask(022);
  CHECK(loom::files::masked_mode(0644) == 0644);
  REQUIRE(loom::files::write_atomic(dir + "/key", "k", 0600).ok());
  ::umask(old);
  struct stat st{};
  REQUIRE(::stat((dir + "/data.json").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  REQUIRE(::stat((dir + "/key").c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  fs::remove_all(dir);
}

TEST_CASE("reading a missing file is not_found and names the path") {
  auto r = loom::files::read_file("/nonexistent/loom/x");
  REQUIRE_FALSE(r.ok());
  CHECK(r.code() == loom::errc::not_found);
  CHECK(r.err().message.find("/nonexistent/loom/x") != std::string::npos);
}

TEST_CASE("the data dir is the flag, else LOOM_HOME, else under HOME") {
  CHECK(loom::files::resolve_data_dir("/x") == "/x");
  ::setenv("LOOM_HOME", "/from/env", 1);
  CHECK(loom::files::resolve_data_dir("") == "/from/env");
  ::unsetenv("LOOM_HOME");
  ::setenv("HOME", "/home/u", 1);
  CHECK(loom::files::resolve_data_dir("") == "/home/u/.local/share/edgeloom");
}
