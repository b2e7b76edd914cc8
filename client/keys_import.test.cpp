// `loom keys import`: a Secret volume's layout (files as symlinks into a
// hidden, timestamped directory, group-readable) becomes <data>/keys as the
// services want it: the same names, 0600 files in 0700 directories.
#include "client/keys_import.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>

#include <filesystem>

using namespace loom;
namespace fs = std::filesystem;

namespace {
unsigned mode_of(const std::string& path) {
  struct stat st{};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  return st.st_mode & 0777;
}
}  // namespace

TEST_CASE("keys from a Secret volume land in <data>/keys owner-only, its own entries left out") {
  files::temp_dir dir;
  const std::string secret = dir.path() + "/secret", keys = dir.path() + "/data/keys";
  // What kubelet makes: ..2026_12_05/<files>, ..data -> it, each name -> ..data/<name>.
  const std::string stamp = secret + "/..2026_12_05_07_00_00.1";
  REQUIRE(files::make_dirs(stamp + "/curve", 0755).ok());
  REQUIRE(files::write_atomic(stamp + "/curve/scheduler.key", "secret-key", 0644).ok());
  REQUIRE(files::write_atomic(stamp + "/curve/scheduler.pub", "public-key", 0644).ok());
  REQUIRE(files::write_atomic(stamp + "/token.key", "token", 0640).ok());
  fs::create_directory_symlink("..2026_12_05_07_00_00.1", secret + "/..data");
  fs::create_directory_symlink("..data/curve", secret + "/curve");
  fs::create_symlink("..data/token.key", secret + "/token.key");

  auto got = cli::import_keys(secret, keys);
  REQUIRE_MESSAGE(got.ok(), got.err().to_string());
  CHECK(*got == std::vector<std::string>{"curve/scheduler.key", "curve/scheduler.pub", "token.key"});
  CHECK(files::read_file(keys + "/curve/scheduler.key").value() == "secret-key");
  CHECK(files::read_file(keys + "/token.key").value() == "token");
  CHECK(mode_of(keys + "/curve/scheduler.key") == 0600);
  CHECK(mode_of(keys + "/token.key") == 0600);
  CHECK(mode_of(keys + "/curve") == 0700);
  CHECK_FALSE(fs::exists(keys + "/..data"));

  // Again (a restarted pod): the same files, replaced in place.
  REQUIRE(files::write_atomic(stamp + "/token.key", "rotated", 0640).ok());
  REQUIRE(cli::import_keys(secret, keys).ok());
  CHECK(files::read_file(keys + "/token.key").value() == "rotated");
}

TEST_CASE("an import with nothing to import, or a file that is no key, is refused naming it") {
  files::temp_dir dir;
  auto missing = cli::import_keys(dir.path() + "/absent", dir.path() + "/keys");
  CHECK(missing.code() == errc::not_found);
  CHECK(missing.err().message.find(dir.path() + "/absent") != std::string::npos);
  REQUIRE(files::make_dirs(dir.path() + "/empty", 0700).ok());
  CHECK(cli::import_keys(dir.path() + "/empty", dir.path() + "/keys").code() == errc::not_found);
  REQUIRE(files::make_dirs(dir.path() + "/big", 0700).ok());
  REQUIRE(files::write_atomic(dir.path() + "/big/huge.key", std::string((1u << 20) + 1, 'x'), 0600).ok());
  auto big = cli::import_keys(dir.path() + "/big", dir.path() + "/keys");
  CHECK(big.code() == errc::invalid_argument);
  CHECK(big.err().message.find("huge.key") != std::string::npos);
  CHECK_FALSE(fs::exists(dir.path() + "/keys/huge.key"));
}
