// Reads tiktoken's encoder files (e.g. npm tiktoken's encoders/gpt2.json):
//   {"explicit_n_vocab": N, "pat_str": "...", "special_tokens": {"<|endoftext|>": 50256},
//    "bpe_ranks": "LABEL FIRST_RANK b64 b64 ...\n..."}  (consecutive ranks per line).
// Internal to libs/tokenizer. Pure functions.
#pragma once

#include "libs/status/status.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace loom::tokenizer::detail {

// The only pre-tokenizer pattern pretokenize.cpp implements.
inline constexpr std::string_view gpt2_pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct vocab_file {
  std::string arena;                   // token bytes, back to back, by rank
  std::vector<std::uint32_t> offsets;  // token r = arena[offsets[r], offsets[r+1])
  std::vector<std::string> specials;   // special token texts; ids follow the ordinary ranks
  std::string pattern;
};

// corruption for anything malformed (bad JSON/base64, ranks not dense 0..N-1,
// duplicate bytes, a single byte missing), naming `source`.
result<vocab_file> parse_vocab(std::string_view json, const std::string& source);

// Standard base64 (with or without '=' padding); false on a bad character.
bool base64_decode(std::string_view in, std::string& out);

}  // namespace loom::tokenizer::detail
