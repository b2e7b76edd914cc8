// Fuzzes the Hugging Face tokenizer.json reader and the tiktoken encoder-file
// reader (libs/tokenizer/train/hf_json.hpp, bpe::parse): a job's
// data.tokenizer names a tokenizer.json that users supply, and `loom model
// check` reads the one beside a model. A file that parses must give an
// encoder whose decode(encode(x)) == x for a few fixed strings.
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/hf_json.hpp"

#include <cstdlib>
#include <string_view>

using namespace loom::tokenizer;

namespace {
void check(const bpe& enc) {
  for (std::string_view s : {"hello world", "  \n\t x", "\xc3\xa9t\xc3\xa9 \xff\xfe 123"}) {
    auto ids = enc.encode(s);
    for (auto id : ids)
      if (!enc.valid_id(id)) std::abort();
    if (enc.decode(ids) != s) std::abort();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto spec = parse_hf_json(text, "fuzz/tokenizer.json"); spec.ok()) {
    if (auto enc = encoder_of(*spec, "fuzz/tokenizer.json"); enc.ok()) check(*enc);
  }
  if (auto enc = bpe::parse(text, "fuzz/encoder.json"); enc.ok()) check(*enc);
  return 0;
}
