// byte_source: a pull stream of bytes. Files, decompressors and archive entries all
// look the same to the format readers, so every reader streams and none needs a
// whole file in memory. A source is used by one thread at a time; a decorator
// (gzip, zstd, peek) borrows its inner source, which must outlive it.
#pragma once

#include "libs/status/status.hpp"
#include "services/ingest/pipeline/document.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

class byte_source {
 public:
  virtual ~byte_source() = default;
  // Reads up to `cap` (> 0) bytes into `buf`. 0 = end of stream. After an error the
  // stream is finished; failure_reason() then says which rejection it is.
  virtual result<std::size_t> read(char* buf, std::size_t cap) = 0;
  reject_reason failure_reason() const { return failure_; }

 protected:
  reject_reason failure_ = reject_reason::io_error;
};

// A file opened for reading. not_found / io_error name the path.
result<std::unique_ptr<byte_source>> open_file_source(const std::string& path);
// The same, opened only inside `roots` (files::open_confined; empty roots:
// no confinement): permission_denied when what would be opened lies outside.
result<std::unique_ptr<byte_source>> open_file_source(const std::string& path, const std::vector<std::string>& roots);

// Bytes held by the caller; `data` must outlive the source.
std::unique_ptr<byte_source> make_memory_source(std::string_view data);

// Reads the first bytes of `inner` ahead so sniffers can look at them, then replays
// them: the bytes returned by read() are exactly those of `inner`. Counts bytes.
class peek_source : public byte_source {
 public:
  explicit peek_source(byte_source& inner) : inner_(inner) {}
  // Up to `n` leading bytes (fewer at end of stream). Call before the first read().
  result<std::string_view> peek(std::size_t n);
  result<std::size_t> read(char* buf, std::size_t cap) override;
  std::uint64_t bytes() const { return bytes_; }

 private:
  byte_source& inner_;
  std::string head_;
  std::size_t head_pos_ = 0;
  std::uint64_t bytes_ = 0;
};

}  // namespace loom::ingest
