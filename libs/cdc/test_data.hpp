// Helpers shared by the cdc_tests binary only (never linked into loom::cdc):
// seeded pseudo-random bytes and small file utilities for temp directories.
#pragma once

#include "libs/files/files.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace loom::cdc::test {

// xorshift64* bytes: fast (~1 GB/s), fixed by the seed, incompressible.
inline std::string pseudo_random(std::size_t n, std::uint64_t seed) {
  std::string s(n, '\0');
  std::uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (std::size_t i = 0; i < n; i += 8) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    std::uint64_t v = x * 0x2545f4914f6cdd1dull;
    std::memcpy(s.data() + i, &v, std::min<std::size_t>(8, n - i));
  }
  return s;
}

// Writes `data` to dir/rel, creating parent directories (no fsync: test data).
inline void put(const std::string& dir, const std::string& rel, std::string_view data) {
  std::filesystem::path p = std::filesystem::path(dir) / rel;
  std::filesystem::create_directories(p.parent_path());
  int fd = ::open(p.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(fd >= 0);
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    REQUIRE(n > 0);
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
}

inline std::string get(const std::string& dir, const std::string& rel) {
  auto r = files::read_file(dir + "/" + rel);
  REQUIRE_MESSAGE(r.ok(), rel);
  return *r;
}

// Overwrites bytes at `offset` of dir/rel in place.
inline void patch(const std::string& dir, const std::string& rel, std::uint64_t offset, std::string_view bytes) {
  int fd = ::open((dir + "/" + rel).c_str(), O_WRONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, bytes.data(), bytes.size(), static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes.size()));
  ::close(fd);
}

}  // namespace loom::cdc::test
