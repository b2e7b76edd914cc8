#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fcntl.h>
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

TEST_CASE("an atomic write of pieces makes one file of them in order, empty pieces included") {
  auto dir = temp_dir();
  const std::string big(1 << 20, 'x');
  const std::string_view parts[] = {"head|", "", big, "|tail"};
  REQUIRE(loom::files::write_atomic_parts(dir + "/f", parts, 0600).ok());
  auto got = loom::files::read_file(dir + "/f");
  REQUIRE(got.ok());
  CHECK(*got == "head|" + big + "|tail");
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

TEST_CASE("write_all writes every byte and pwrite_all lands each piece at its offset") {
  auto dir = temp_dir();
  const std::string path = dir + "/f";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  REQUIRE(fd >= 0);
  const std::string big(3 << 20, 'x');  // several MB in one call
  REQUIRE(loom::files::write_all(fd, big, path).ok());
  REQUIRE(loom::files::pwrite_all(fd, "AB", 1, path).ok());
  REQUIRE(loom::files::write_all(fd, "", path).ok());
  REQUIRE(loom::files::write_all(fd, std::string("\0Z", 2), path).ok());
  ::close(fd);
  auto got = loom::files::read_file(path);
  REQUIRE(got.ok());
  REQUIRE(got->size() == big.size() + 2);
  CHECK(got->substr(0, 4) == "xABx");
  CHECK(got->substr(big.size()) == std::string("\0Z", 2));  // pwrite_all left the file offset at the end
  fs::remove_all(dir);
}

TEST_CASE("a failed write names the path, and a full disk is resource_exhausted") {
  int fd = ::open("/dev/full", O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;  // no /dev/full in this sandbox
  auto full = loom::files::write_all(fd, "data", "/spool/seg-1");
  ::close(fd);
  REQUIRE_FALSE(full.ok());
  CHECK(full.code() == loom::errc::resource_exhausted);
  CHECK(full.err().message.rfind("write /spool/seg-1: ", 0) == 0);
  auto bad = loom::files::pwrite_all(-1, "data", 0, "/x/part");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.code() == loom::errc::internal);  // EBADF
  CHECK(bad.err().message.find("/x/part") != std::string::npos);
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
