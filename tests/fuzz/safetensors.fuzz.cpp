// Fuzzes the strict safetensors reader (libs/ckpt/safetensors.hpp) and the
// GPT-2 checkpoint metadata reader on top of it (gpt2_checkpoint.hpp):
// checkpoints come back from trainers at other sites, `loom model check`
// validates them and a resumed stage maps them, so the JSON header, the
// offsets and the metadata are outside input. Every tensor of a file that
// parses must lie inside the file and match its shape and dtype.
#include "libs/ckpt/gpt2_checkpoint.hpp"
#include "libs/ckpt/safetensors.hpp"

#include <cstdlib>
#include <string>

using namespace loom::ckpt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  auto f = parse_safetensors(bytes, "fuzz.safetensors");
  if (!f.ok()) return 0;
  for (const auto& [name, t] : f->tensors()) {
    std::uint64_t count = 1;
    for (auto d : t.shape) count *= d;  // a shape whose product wraps must have been refused
    if (t.data.size() != count * dtype_size(t.type)) std::abort();
    if (f->find(name) != &t) std::abort();
  }
  (void)gpt2_config_from(f->meta(), "fuzz.safetensors");
  return 0;
}
