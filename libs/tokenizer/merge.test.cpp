#include "libs/files/files.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/merge.hpp"
#include "libs/tokenizer/vocab.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <vector>

using namespace loom::tokenizer;
using namespace loom::tokenizer::detail;

namespace {

// Byte tokens 0..255 in byte order, then `extra` with ranks 256, 257, ...
merge_tables tiny_tables(const std::vector<std::string>& extra, token_map& tokens) {
  std::string arena;
  std::vector<std::uint32_t> off{0};
  for (int b = 0; b < 256; ++b) {
    arena.push_back(static_cast<char>(b));
    off.push_back(static_cast<std::uint32_t>(arena.size()));
  }
  for (const auto& e : extra) {
    arena += e;
    off.push_back(static_cast<std::uint32_t>(arena.size()));
  }
  tokens.build(arena, off);
  merge_tables t;
  for (int b = 0; b < 256; ++b) t.byte_rank[b] = static_cast<std::uint32_t>(b);
  t.pairs.build(tokens);
  return t;
}

std::vector<std::uint32_t> run(const merge_tables& t, const std::string& s, bool heap) {
  std::vector<std::uint32_t> out;
  merge_scratch sc;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  if (heap) merge_heap(t, p, s.size(), out, sc);
  else merge_scan(t, p, s.size(), out);
  return out;
}

}  // namespace

TEST_CASE("merges take the lowest rank first and the leftmost pair on ties") {
  token_map tokens;
  // aa=256 ab=257 aaa=258 ba=259
  const auto t = tiny_tables({"aa", "ab", "aaa", "ba"}, tokens);
  for (bool heap : {false, true}) {
    CAPTURE(heap);
    CHECK(run(t, "aaa", heap) == std::vector<std::uint32_t>{258});    // aa|a, then aaa
    CHECK(run(t, "aaaa", heap) == std::vector<std::uint32_t>{256, 256});
    CHECK(run(t, "aab", heap) == std::vector<std::uint32_t>{256, 'b'});  // aa (256) beats ab (257)
    CHECK(run(t, "bab", heap) == std::vector<std::uint32_t>{'b', 257});  // ab (257) beats ba (259)
    CHECK(run(t, "xyz", heap) == std::vector<std::uint32_t>{'x', 'y', 'z'});
  }
}

TEST_CASE("the heap merge gives the scan's ids on GPT-2 for long random pieces") {
  auto text = loom::files::read_file(std::getenv(gpt2_vocab_env) ? std::getenv(gpt2_vocab_env) : gpt2_vocab_default_path);
  REQUIRE_MESSAGE(text.ok(), "GPT-2 vocabulary missing: run scripts/install-vocab");
  auto v = parse_vocab(*text, "gpt2.json");
  REQUIRE(v.ok());
  token_map tokens;
  tokens.build(v->arena, v->offsets);
  merge_tables t;
  for (int b = 0; b < 256; ++b) {
    const auto c = static_cast<unsigned char>(b);
    t.byte_rank[b] = tokens.find(&c, 1, hash_bytes(&c, 1));
  }
  t.pairs.build(tokens);
  CHECK(t.pairs.size() > 100000);

  std::mt19937_64 rng(7);
  const std::vector<std::string> alphabets = {"a", "ab", "etaoin", "0123456789", " ", "=-", "abcdefghijklmnopqrstuvwxyz",
                                              "\xE4\xB8\xAD\xE6\x96\x87", "\xC3\xA9\xC3\xA8"};
  for (int i = 0; i < 300; ++i) {
    const auto& abc = alphabets[i % alphabets.size()];
    std::string s;
    const std::size_t n = 1 + rng() % 3000;
    while (s.size() < n) s.push_back(abc[rng() % abc.size()]);  // bytes, not characters: merge sees bytes
    REQUIRE(run(t, s, true) == run(t, s, false));
  }
}
