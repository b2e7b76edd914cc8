// Fuzzes the ring all-reduce frame header decoder (libs/collective/frame.hpp):
// a trainer's PULL socket receives these frames from the other members of its
// group, so the header's counts and offsets are a peer's word, not ours.
// Whatever decodes must describe exactly the frame it came from.
#include "libs/collective/frame.hpp"

#include <cstdlib>

using namespace loom::collective;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto h = decode_header(data, size);
  if (!h.ok()) return 0;
  // The size check must hold without overflow: header + count * 4 == size.
  if (h->count > (size - frame_header_bytes) / 4 || frame_header_bytes + h->count * 4 != size) std::abort();
  unsigned char again[frame_header_bytes];
  encode_header(*h, again);
  for (std::size_t i = 0; i < frame_header_bytes; ++i)
    if (again[i] != data[i]) std::abort();
  (void)describe_position(*h);
  return 0;
}
