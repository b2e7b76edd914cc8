// Streaming gzip (zlib) and zstd (libzstd) decoders as byte_source decorators.
// Memory is bounded by their fixed buffers whatever the stream's size. A stream
// that ends early fails with truncated_compression, bad data with
// corrupt_compression. Each decoder borrows `inner`, which must outlive it.
#pragma once

#include "services/ingest/pipeline/readers/byte_source.hpp"

#include <memory>
#include <string_view>

namespace loom::ingest {

enum class compression : std::uint8_t { none, gzip, zstd };

// From the leading bytes: gzip (1f 8b), zstd frame (28 b5 2f fd), else none.
compression compression_from_magic(std::string_view head);

// A decoder over `inner`; nullptr for compression::none.
std::unique_ptr<byte_source> make_decompressor(compression c, byte_source& inner);

}  // namespace loom::ingest
