// files::buffered_reader: a sequential reader of binary records with a buffer
// of its own (exact byte counts: a record is there whole or the file is
// corrupt), plus positioned reads. The dedup spill runs and the importer's
// pass-1 spill read their files back with it. Errors name the path; see
// errno_error for the codes. Owned by one thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::files {

class buffered_reader {
 public:
  // not_found / permission_denied / internal naming the path.
  static result<buffered_reader> open(std::string path, std::size_t buffer_bytes = std::size_t{1} << 20);
  buffered_reader(buffered_reader&& o) noexcept;
  buffered_reader& operator=(buffered_reader&& o) noexcept;
  buffered_reader(const buffered_reader&) = delete;
  buffered_reader& operator=(const buffered_reader&) = delete;
  ~buffered_reader();

  // Fills out[0, n): true; clean end of file before the first byte: false;
  // end of file part-way: corruption ("<path>: ends part-way through a record").
  result<bool> read(void* out, std::size_t n);
  status seek(std::uint64_t offset);  // the next read starts there
  // Exactly n bytes at offset (corruption when the file is shorter); leaves
  // the sequential position alone.
  status pread(void* out, std::size_t n, std::uint64_t offset) const;
  std::uint64_t size() const { return size_; }  // at open
  const std::string& path() const { return path_; }

 private:
  buffered_reader() = default;
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
  std::uint64_t size_ = 0;
};

}  // namespace loom::files
