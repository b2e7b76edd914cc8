// Helpers shared by the fuzz targets for parsers that only take a path: the
// input is written to a per-process scratch directory on tmpfs (/dev/shm, or
// $TMPDIR when /dev/shm is missing) so a file round trip costs microseconds.
// One fuzzing process per directory (the pid is in its name); not thread-safe.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace loom::fuzz {

// A fresh, empty directory of this process: <tmpfs>/loom-fuzz-<tag>-<pid>,
// removed when the process exits normally (libFuzzer's -max_total_time).
// One tag per process.
inline const std::filesystem::path& scratch_dir(std::string_view tag) {
  static const std::filesystem::path dir = [&] {
    std::filesystem::path base = "/dev/shm";
    if (!std::filesystem::is_directory(base)) {
      const char* t = std::getenv("TMPDIR");
      base = t ? t : "/tmp";
    }
    auto d = base / ("loom-fuzz-" + std::string(tag) + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(d);
    std::filesystem::create_directories(d);
    return d;
  }();
  // Registered after `dir` is constructed, so it runs before `dir` is destroyed.
  static const bool cleanup = (std::atexit([] {
                                 std::error_code ec;
                                 std::filesystem::remove_all(dir, ec);
                               }),
                               true);
  (void)cleanup;
  return dir;
}

// Empties `dir` without removing it (between inputs, so no state leaks).
inline void clear_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) std::filesystem::remove_all(e.path(), ec);
}

// Writes `bytes` to dir/name (replacing it) and returns the path.
inline std::string write_file(const std::filesystem::path& dir, const std::string& name, const std::uint8_t* data,
                              std::size_t size) {
  auto p = dir / name;
  std::ofstream(p, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                           static_cast<std::streamsize>(size));
  return p.string();
}

}  // namespace loom::fuzz
