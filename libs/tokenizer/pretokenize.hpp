// The GPT-2 pre-tokenizer, by hand: splits text into the pieces that
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches, leftmost-first, as tiktoken does. Works on raw bytes: a byte that does
// not start well-formed UTF-8 counts as one character of class `other` (as
// U+FFFD would), so every input splits and the pieces cover it exactly.
// Pure functions; any thread.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

// End (exclusive byte offset) of the piece that starts at `pos`.
// REQUIRES: pos < text.size(). Returns a value in (pos, text.size()].
std::size_t piece_end(std::string_view text, std::size_t pos);

// All pieces of `text`, in order (for tests and tools; encode uses piece_end).
std::vector<std::string_view> split_pieces(std::string_view text);

}  // namespace loom::tokenizer
