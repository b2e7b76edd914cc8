// Fuzzes the strict GGUF reader (libs/export/gguf.hpp): `loom model check`
// and the export tests read GGUF files back, and a GGUF file handed in from
// outside (llama.cpp's format) is untrusted: counts, string lengths, tensor
// offsets and types all come from the file. Every tensor of a file that
// parses must lie inside it, and dequantize must read only its own bytes.
#include "libs/export/gguf.hpp"

#include <cstdlib>
#include <string>

using namespace loom::exporter;

namespace {
// Dequantizing bigger tensors is valid but only slows the fuzzer down.
constexpr std::uint64_t max_values = 1u << 20;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  auto f = parse_gguf(std::string(reinterpret_cast<const char*>(data), size), "fuzz.gguf");
  if (!f.ok()) return 0;
  for (const auto& kv : f->kv())
    if (f->find(kv.key) == nullptr) std::abort();
  for (const auto& t : f->tensors()) {
    auto bytes = gguf_bytes(t.type, t.count());
    if (!bytes || *bytes != t.bytes || f->data(t).size() != t.bytes) std::abort();
    if (f->data_start() + t.offset + t.bytes > size) std::abort();
    if (t.count() <= max_values && dequantize(*f, t).size() != t.count()) std::abort();
  }
  return 0;
}
