// read_capped: a bounded read that names the file and the limit.
#include "client/input.hpp"

#include "libs/files/files.hpp"
#include "libs/files/temp_dir.hpp"

#include <doctest/doctest.h>

#include <chrono>

using loom::cli::read_capped;

TEST_CASE("a file within the limit is read whole and one past it is refused naming file and limit") {
  loom::files::temp_dir dir("loom-input");
  const std::string p = dir.path() + "/f";
  REQUIRE(loom::files::write_atomic(p, std::string(1024, 'x')).ok());
  auto all = read_capped(p, 1024, "`loom x`");
  REQUIRE(all.ok());
  CHECK(all->size() == 1024);
  auto over = read_capped(p, 1023, "`loom x`");
  REQUIRE_FALSE(over.ok());
  CHECK(over.code() == loom::errc::resource_exhausted);
  CHECK(over.err().message == p + " is larger than 1023 bytes (the most `loom x` reads)");
  auto missing = read_capped(dir.path() + "/none", 10, "`loom x`");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.code() == loom::errc::not_found);
}

TEST_CASE("a file that never ends is refused after the limit, not read forever") {
  const auto t0 = std::chrono::steady_clock::now();
  auto r = read_capped("/dev/zero", 4 << 20, "`loom x`");
  REQUIRE_FALSE(r.ok());
  CHECK(r.err().message == "/dev/zero is larger than 4 MiB (the most `loom x` reads)");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
}

TEST_CASE("sizes print in the largest whole unit") {
  CHECK(loom::cli::size_text(256ULL << 20) == "256 MiB");
  CHECK(loom::cli::size_text(64 << 10) == "64 KiB");
  CHECK(loom::cli::size_text(1000) == "1000 bytes");
  CHECK(loom::cli::size_text(1ULL << 50) == "1024 TiB");
}
