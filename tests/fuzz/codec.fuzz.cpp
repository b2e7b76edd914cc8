// Fuzzes DiLoCo delta payload decoding, every codec (libs/codec/codec.hpp):
// the aggregator decodes the deltas sites upload and a site decodes the outer
// update the cloud sends, so a payload's header, sizes, scales and topk
// indices are outside input. inspect() promises a payload it accepts decodes
// (and decode_add's into an accumulator) without error and never reads
// outside the payload; both are checked here, and decoded values must be finite.
#include "libs/codec/codec.hpp"

#include <cmath>
#include <cstdlib>
#include <vector>

using namespace loom::codec;

namespace {
// Larger counts are valid but only slow the fuzzer down (the formats repeat per block).
constexpr std::uint64_t max_values = 1u << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::span<const std::byte> payload(reinterpret_cast<const std::byte*>(data), size);
  auto h = inspect(payload);
  std::vector<float> out(16);
  auto st = decode(payload, out);
  if (!h.ok()) {
    // inspect refused: decode must refuse too, whatever out's size.
    if (st.ok()) std::abort();
    return 0;
  }
  if (h->n > max_values) return 0;
  out.assign(h->n, 0.0f);
  if (!decode(payload, out).ok()) std::abort();
  for (float v : out)
    if (!std::isfinite(v)) std::abort();
  std::vector<float> acc(h->n, 1.0f);
  if (!decode_add(payload, acc, 0.5f).ok()) std::abort();
  if (h->n > 0 && !decode(payload, std::span<float>(out).first(h->n - 1)).ok()) return 0;
  if (h->n > 0) std::abort();  // a wrong-sized output must be refused
  return 0;
}
