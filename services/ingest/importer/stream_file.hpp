// Buffered sequential files for the importer: an appending writer (rejects.jsonl,
// records.jsonl, the pass-1 spill) that fsyncs on close when asked, and a
// reader that fills exact byte counts (the spill read back). Errors name the
// path; ENOSPC becomes resource_exhausted. Each object is owned by one thread.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

class out_stream {
 public:
  // Creates (truncates) `path`; `buffer_bytes` of buffer.
  static result<out_stream> create(const std::string& path, std::size_t buffer_bytes = std::size_t{1} << 20);
  out_stream(out_stream&& o) noexcept;
  out_stream& operator=(out_stream&& o) noexcept;
  out_stream(const out_stream&) = delete;
  out_stream& operator=(const out_stream&) = delete;
  ~out_stream();  // closes without fsync, ignoring errors (an abandoned file)

  status write(std::string_view bytes);
  // Flushes, fsyncs when `durable`, closes. REQUIRES: no write afterwards.
  status close(bool durable);
  std::uint64_t bytes_written() const { return written_; }
  const std::string& path() const { return path_; }

 private:
  out_stream() = default;
  status flush();
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  std::size_t used_ = 0;
  std::uint64_t written_ = 0;
};

class in_stream {
 public:
  static result<in_stream> open(const std::string& path, std::size_t buffer_bytes = std::size_t{1} << 20);
  in_stream(in_stream&& o) noexcept;
  in_stream& operator=(in_stream&& o) noexcept;
  in_stream(const in_stream&) = delete;
  in_stream& operator=(const in_stream&) = delete;
  ~in_stream();

  // Fills out[0, n): true; clean end of file before the first byte: false;
  // end of file part-way: corruption.
  result<bool> read(void* out, std::size_t n);

 private:
  in_stream() = default;
  int fd_ = -1;
  std::string path_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;
};

}  // namespace loom::ingest
