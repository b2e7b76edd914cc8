// Token shard file format, version 1. A shard holds whole documents of token ids;
// ingest writes shards (shard_writer), the trainer reads them (shard_reader, dataset).
// Plain constants and value helpers; safe from any thread.
//
// All integers little-endian (the only byte order we build for; see static_assert).
//
//   offset  size  field
//   0       8     magic "LOOMSHRD"
//   8       4     version (u32) = 1
//   12      4     dtype (u32): 1 = uint16 ids, 2 = uint32 ids
//   16      8     token_count (u64)
//   24      8     doc_count (u64)
//   32      8     tokens_offset (u64) = 64
//   40      8     index_offset (u64) = 64 + token_count * width(dtype)
//   48      8     file_size (u64) = index_offset + doc_count * 8
//   56      8     reserved, written as 0
//   64            tokens: token_count ids of width(dtype) bytes
//   index_offset  document index: doc_count u64 start offsets, in tokens. Document k spans
//                 [start[k], start[k+1]) with start[doc_count] = token_count; start[0] = 0,
//                 non-decreasing, each <= token_count (empty documents are allowed).
//
// Integrity: the header carries no hash. manifest.json records the SHA-256 of the whole
// file and the reader checks it when given one; a hash inside the file would only prove the
// file agrees with itself, not that it is the shard the manifest names.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace loom::shards {

static_assert(std::endian::native == std::endian::little,
              "shards are little-endian on disk and read without byte swapping");

enum class dtype : std::uint32_t { uint16 = 1, uint32 = 2 };

inline constexpr std::string_view magic = "LOOMSHRD";
inline constexpr std::uint32_t format_version = 1;
inline constexpr std::size_t header_bytes = 64;

// uint16 when every id of a vocabulary of this size fits in 16 bits, else uint32.
inline dtype dtype_for_vocab(std::uint64_t vocab_size) {
  return vocab_size <= 65535 ? dtype::uint16 : dtype::uint32;
}
inline std::size_t width(dtype t) { return t == dtype::uint16 ? 2 : 4; }
std::string_view to_string(dtype t);                          // "uint16" / "uint32"
std::optional<dtype> dtype_from_string(std::string_view name);  // inverse; nullopt if unknown

// "shard-000001.bin" for index 1. Shards are numbered from 1.
std::string shard_file_name(std::uint64_t index);

}  // namespace loom::shards
