// collective frames: the 64-byte header every ring frame starts with, and its
// codec. A frame is one ZeroMQ message: header, then `count` floats (host
// order, IEEE-754; every member is little-endian). Pure functions, no state.
//
//   offset  size  field
//        0     4  magic "LRA1" (loom ring all-reduce, version 1)
//        4     4  sender rank
//        8     4  world
//       12     4  phase: 0 reduce-scatter, 1 all-gather
//       16     8  generation (the formation)
//       24     8  call number (1 for a group's first all_reduce_sum)
//       32     4  step within the phase, 0 .. world-2
//       36     4  chunk index, 0 .. world-1
//       40     8  offset of the first float in the caller's buffer
//       48     8  count of floats in this frame
//       56     8  total floats in the buffer being reduced
//       64        payload: count * 4 bytes
// Integers are little-endian.
#pragma once

#include "libs/status/status.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace loom::collective {

constexpr std::size_t frame_header_bytes = 64;

enum class phase : std::uint32_t { reduce_scatter = 0, all_gather = 1 };

struct frame_header {
  std::uint32_t sender = 0;
  std::uint32_t world = 0;
  phase ph = phase::reduce_scatter;
  std::uint64_t generation = 0;
  std::uint64_t call = 0;
  std::uint32_t step = 0;
  std::uint32_t chunk = 0;
  std::uint64_t offset = 0;
  std::uint64_t count = 0;
  std::uint64_t total = 0;
};

// Writes the header into out[0 .. frame_header_bytes).
void encode_header(const frame_header& h, void* out);

// Reads the header of a frame of `size` bytes. corruption for a frame shorter
// than the header, a bad magic, an unknown phase, or a size other than
// header + count * 4; the caller prefixes where the frame came from.
result<frame_header> decode_header(const void* frame, std::size_t size);

// "12,345": counts in error messages.
std::string with_commas(std::uint64_t n);

// "reduce-scatter step 1 chunk 2": where in the ring a frame belongs.
std::string describe_position(const frame_header& h);

}  // namespace loom::collective
