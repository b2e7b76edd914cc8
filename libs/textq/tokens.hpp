// The scorer's tokenization: bytes. Every byte of a text is one token (0..255)
// and one boundary token (256) marks a document's start and end, so V = 257.
// Why bytes and not GPT-2's BPE (50257 tokens): the LM head costs V·C per
// token, ~3.2 M multiply-adds at C = 64, 25x the blocks. Measured per window
// of 128 tokens on one core (textq_bench): 1.0 ms for bytes, 11.6 ms with
// BPE's head, i.e. 8 against 23 us per byte even crediting BPE ~4 bytes a
// token. Bytes also take any input, UTF-8 or not, with no vocabulary file.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace loom::textq {

enum class tokenizer_kind : std::uint32_t { bytes = 1 };

inline constexpr std::int32_t boundary_token = 256;  // start and end of a document
inline constexpr int byte_vocab = 257;               // 256 bytes + the boundary
// Rows of wte: a multiple of 64 keeps the LM head's sgemm on whole vector
// blocks; the 63 padding rows stay zero and cost 63·C multiply-adds a token.
inline constexpr int byte_padded_vocab = 320;

// [boundary] + the bytes of `text` (at most max_bytes of them) + [boundary].
void to_tokens(std::string_view text, std::size_t max_bytes, std::vector<std::int32_t>& out);

}  // namespace loom::textq
