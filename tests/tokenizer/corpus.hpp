// Deterministic test text for the tokenizer oracle tests: generated from a seed
// (nothing committed), valid UTF-8, covering what GPT-2's pre-tokenizer and
// merges treat differently. Single-threaded helpers; no state between calls.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace loom::test::tok {

struct document {
  std::string kind;  // prose, code, scripts, emoji, whitespace, numbers, contractions, punctuation, soup, long_runs, mixed
  std::string text;
};

// Documents of every kind, 100 B - 64 KB each, until their total reaches target_bytes.
std::vector<document> generate(std::uint64_t seed, std::size_t target_bytes);

// Every Unicode scalar value c (surrogates excluded), in contexts "  " c "'s"
// that split differently for \s, [\p{L}\p{N}] and the rest: documents of 4096.
std::vector<document> code_point_sweep();

// Appends the UTF-8 encoding of a scalar value.
void append_utf8(std::string& s, char32_t cp);

// The node oracles' file format (oracle.js, tokenizer_train/hf_oracle.js):
// each document or id list as a little-endian u32 count, then the bytes /
// the u32 ids. parse_ids: nullopt when `framed` is cut or malformed.
void append_frame(std::string& out, std::string_view text);
std::optional<std::vector<std::vector<std::uint32_t>>> parse_ids(const std::string& framed);

}  // namespace loom::test::tok
