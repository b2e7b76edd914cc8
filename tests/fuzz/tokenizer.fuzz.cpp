// Fuzzes the GPT-2 tokenizer (libs/tokenizer/bpe.hpp, bpe::encode and the
// pre-tokenizer split_pieces): ingest tokenizes every imported document and
// `loom tokenize` any text, valid UTF-8 or not. The header promises
// decode(encode(x)) == x for any bytes, every id valid, and pieces that tile
// the text; all three are checked. Needs the GPT-2 vocabulary
// ($LOOM_GPT2_VOCAB or /usr/local/share/edgeloom/gpt2.json, scripts/install-vocab).
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/pretokenize.hpp"

#include <cstdio>
#include <cstdlib>
#include <string_view>

using namespace loom::tokenizer;

namespace {
const bpe& gpt2() {
  static const bpe b = [] {
    auto r = bpe::load_gpt2();
    if (!r.ok()) {
      std::fprintf(stderr, "fuzz_tokenizer: %s\n", r.err().message.c_str());
      std::exit(2);
    }
    return *r;
  }();
  return b;
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::size_t at = 0;
  for (auto piece : split_pieces(text)) {
    if (piece.empty() || piece.data() != text.data() + at) std::abort();
    at += piece.size();
  }
  if (at != text.size()) std::abort();
  const bpe& b = gpt2();
  auto ids = b.encode(text);
  for (auto id : ids)
    if (!b.valid_id(id) || id >= b.ordinary_size()) std::abort();
  if (b.decode(ids) != text) std::abort();
  return 0;
}
