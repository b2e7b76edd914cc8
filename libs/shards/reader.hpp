// shard_reader: a validated, read-only, memory-mapped view of one shard file with random
// access to tokens and documents (ids widened to u32 into a caller buffer). A shard sealed
// at rest (libs/atrest) is unsealed into memory the reader owns instead of mapped. Immutable
// after open, so const calls are safe from several threads; movable, not copyable.
#pragma once

#include "libs/shards/format.hpp"
#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace loom::atrest {
class kek_store;
}

namespace loom::shards {

class shard_reader {
 public:
  // Maps and validates `path`: magic, version, dtype, header offsets against counts and the
  // real file size, the document index (starts at 0, non-decreasing, within the tokens) and,
  // when expected_sha256_hex is non-empty, the SHA-256 of the whole file (of its plaintext
  // when sealed). Every refusal is errc::corruption naming the file and what was wrong;
  // not_found when it does not exist. A sealed file is opened with `keys`, else the
  // process's at-rest keys (atrest::process_keys), its tags verified first.
  static result<shard_reader> open(const std::string& path,
                                   std::string_view expected_sha256_hex = {},
                                   atrest::kek_store* keys = nullptr);

  shard_reader(shard_reader&& o) noexcept;
  shard_reader& operator=(shard_reader&& o) noexcept;
  shard_reader(const shard_reader&) = delete;
  shard_reader& operator=(const shard_reader&) = delete;
  ~shard_reader();

  const std::string& path() const { return path_; }
  dtype type() const { return type_; }
  std::uint64_t token_count() const { return tokens_; }
  std::uint64_t doc_count() const { return docs_; }

  // Tokens [first, first + n) copied into buf[0, n); returns that prefix of buf.
  // invalid_argument when the range is outside the shard or buf is smaller than n.
  result<std::span<const std::uint32_t>> tokens(std::uint64_t first, std::uint64_t n,
                                                std::span<std::uint32_t> buf) const;
  // REQUIRES: k < doc_count().
  std::uint64_t document_size(std::uint64_t k) const;
  // Document k copied into buf; invalid_argument when k is out of range or buf too small.
  result<std::span<const std::uint32_t>> document(std::uint64_t k,
                                                  std::span<std::uint32_t> buf) const;

 private:
  shard_reader() = default;
  std::uint64_t doc_start(std::uint64_t k) const;
  status validate(std::string_view expected_sha);  // header, index and hash of base_[0, size_)  // k <= doc_count; k == doc_count -> tokens

  std::string path_;
  std::unique_ptr<std::string> plain_;   // a sealed shard's plaintext (base_ points into it)
  const unsigned char* base_ = nullptr;  // the mapping or plain_, size_ bytes
  std::size_t size_ = 0;
  dtype type_ = dtype::uint16;
  std::uint64_t tokens_ = 0;
  std::uint64_t docs_ = 0;
  std::uint64_t index_offset_ = 0;
};

}  // namespace loom::shards
