// FastCDC content-defined chunking (Xia et al., USENIX ATC'16; TPDS'20): a gear
// rolling hash, no cut point below min_size, normalized chunking with a harder
// mask before avg_size and an easier one after it (level 2), a hard cut at
// max_size, and two bytes rolled per loop step. Cut points depend only on the
// bytes and the params, so they are reproducible across machines and versions:
// changing the gear table or the masks changes every chunk id on disk.
// Stateless functions; thread-safe.
#pragma once

#include "libs/crypto/hash.hpp"
#include "libs/status/status.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::cdc {

// Chunk size bounds. The defaults (16/64/256 KiB) are casync's granularity:
// a small edit costs one or two ~64 KiB chunks, and a 256 MiB corpus has
// ~4000 chunks, so a manifest stays a few hundred KB.
struct params {
  std::uint32_t min_size = 16u << 10;
  std::uint32_t avg_size = 64u << 10;  // a power of two
  std::uint32_t max_size = 256u << 10;

  bool operator==(const params&) const = default;
};

// invalid_argument unless 64 <= min_size < avg_size < max_size <= 64 MiB,
// avg_size is a power of two in 2^8..2^24.
status validate(const params& p);

// The 256 gear values (fixed, from a seeded splitmix64; see fastcdc.cpp).
const std::array<std::uint64_t, 256>& gear_table();
// The two judgement masks: (fp & mask) == 0 is a cut. mask_small has
// log2(avg)+2 bits (used before avg_size), mask_large log2(avg)-2 (after).
// Bits sit just below bit 63, so each depends on the last ~45-60 bytes.
std::uint64_t mask_small(const params& p);
std::uint64_t mask_large(const params& p);

// Length of the first chunk of data[0, n). REQUIRES: validate(p) ok;
// n >= p.max_size unless the data ends there (the last chunk may be short).
std::size_t next_cut(const std::uint8_t* data, std::size_t n, const params& p);

// Lengths of all chunks of an in-memory buffer (no hashing).
std::vector<std::uint32_t> chunk_lengths(std::string_view data, const params& p = {});

// One chunk of a file or stream.
struct chunk {
  std::uint64_t offset = 0;
  std::uint32_t length = 0;
  crypto::digest sha256{};

  bool operator==(const chunk&) const = default;
};

// Chunks and SHA-256 of an in-memory buffer.
std::vector<chunk> chunk_data(std::string_view data, const params& p = {});

// Streaming form: `read` fills up to `cap` bytes and returns how many (0 = end
// of stream); `on_chunk` gets every chunk in order. An error from either stops
// the walk and is returned. Holds one buffer of max(4 MiB, 2 * max_size).
using read_fn = std::function<result<std::size_t>(char* buf, std::size_t cap)>;
using chunk_fn = std::function<status(std::uint64_t offset, std::string_view bytes)>;
status chunk_stream(const read_fn& read, const params& p, const chunk_fn& on_chunk);

// Chunks and SHA-256 of a file read sequentially from `fd` (from its current
// position) or from `path`. Errors name the path.
result<std::vector<chunk>> chunk_fd(int fd, const std::string& path, const params& p = {});
result<std::vector<chunk>> chunk_file(const std::string& path, const params& p = {});

}  // namespace loom::cdc
