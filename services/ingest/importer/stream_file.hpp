// Buffered sequential files for the importer: an appending writer (rejects.jsonl,
// records.jsonl, the pass-1 spill) that fsyncs on close when asked — or,
// given keys, writes the file sealed at rest (libs/atrest: published whole,
// atomically, on close; nothing at the path before) — and a
// reader that fills exact byte counts (the spill read back). Errors name the
// path; ENOSPC becomes resource_exhausted. Each object is owned by one thread.
#pragma once

#include "libs/files/buffered_reader.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::atrest {
class kek_store;
class sealed_writer;
}  // namespace loom::atrest

namespace loom::ingest {

class out_stream {
 public:
  // Creates (truncates) `path`; `buffer_bytes` of buffer. With `seal`, the
  // file is sealed under it and appears at `path` on close (always durable).
  static result<out_stream> create(const std::string& path, std::size_t buffer_bytes = std::size_t{1} << 20,
                                   std::shared_ptr<atrest::kek_store> seal = nullptr);
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
  std::shared_ptr<atrest::kek_store> keys_;
  std::unique_ptr<atrest::sealed_writer> sealed_;  // instead of fd_ when sealing
  std::string path_;
  std::vector<char> buf_;
  std::size_t used_ = 0;
  std::uint64_t written_ = 0;
};

// Reads the pass-1 spill back: exact byte counts, a cut record is corruption.
using in_stream = files::buffered_reader;

}  // namespace loom::ingest
