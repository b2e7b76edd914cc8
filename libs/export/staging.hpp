// Atomic publication of an export: everything is written into a temp file or
// directory beside the destination (same filesystem), fsynced, and renamed
// into place by commit(). Until then the destination is untouched; an object
// destroyed without commit() removes what it wrote, so a failed export leaves
// nothing half-written behind. Move-only; one thread uses an object.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

namespace loom::exporter {

// A file at `out`, written through a buffer.
class staged_file {
 public:
  // already_exists when `out` exists; its parent directory is created if missing.
  static result<staged_file> create(const std::filesystem::path& out);
  staged_file(staged_file&&) noexcept;
  staged_file& operator=(staged_file&&) = delete;
  ~staged_file();

  status write(std::span<const std::byte> bytes);
  status write(std::string_view bytes);
  std::size_t written() const { return written_; }
  // Flush, fsync, rename to `out` (refusing, with already_exists, a file that
  // appeared there meanwhile), fsync the directory.
  status commit();

 private:
  staged_file() = default;
  status flush();
  std::filesystem::path out_, temp_;
  int fd_ = -1;
  std::vector<std::byte> buf_;
  std::size_t written_ = 0;
  bool committed_ = false;
};

// A directory at `out`, filled by the caller under path().
class staged_dir {
 public:
  // already_exists when `out` exists and is not an empty directory; its
  // parent is created if missing.
  static result<staged_dir> create(const std::filesystem::path& out);
  staged_dir(staged_dir&&) noexcept;
  staged_dir& operator=(staged_dir&&) = delete;
  ~staged_dir();

  const std::filesystem::path& path() const { return temp_; }
  // fsync every file and the temp directory, rename it to `out` (over an
  // empty directory; already_exists if one with files appeared meanwhile),
  // fsync the parent.
  status commit();

 private:
  staged_dir() = default;
  std::filesystem::path out_, temp_;
  bool committed_ = false;
};

}  // namespace loom::exporter
