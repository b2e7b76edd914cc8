// train_bpe: learns a GPT-2-style byte-level BPE from pre-token counts
// (piece_counts.hpp): 256 byte tokens (id = byte value), then one token per
// merge in merge order, then the special token <|endoftext|>. Each step merges
// the adjacent pair of tokens that occurs most often over all pieces (weighted
// by their counts); ties go to the pair whose (left bytes, right bytes) is
// lexicographically smallest, so the result depends only on the counts. A pair
// whose concatenation is already a token is never merged: every token is made
// by exactly one merge, which is what bpe::from_merges (and so
// tokenizer::load_hf_json) implements. Pair counts are updated incrementally
// and the best pair comes from a lazily corrected heap: 20 MB to 8k tokens in
// seconds. Pure function; any thread.
#pragma once

#include "libs/status/status.hpp"
#include "libs/tokenizer/bpe.hpp"
#include "libs/tokenizer/train/piece_counts.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::tokenizer {

inline constexpr std::string_view end_of_text = "<|endoftext|>";
inline constexpr std::size_t min_trained_vocab = 257;             // the 256 bytes and <|endoftext|>
inline constexpr std::size_t max_trained_vocab = std::size_t{1} << 20;

struct train_options {
  std::size_t vocab_size = 8192;    // ordinary tokens + <|endoftext|>, in [257, 2^20]
  std::uint64_t min_frequency = 2;  // training stops when the best pair occurs fewer times
  // Pieces longer than this (base64 blobs, long runs) are learned from in parts
  // of this many bytes: each merge rescans every word it touches, whole.
  std::size_t max_word = 1024;
};

struct trained_bpe {
  std::vector<std::string> tokens;        // ordinary tokens' bytes by id
  std::vector<bpe::merge_pair> merges;    // merge i makes token 256 + i
  std::string special{end_of_text};       // id tokens.size()
  std::uint64_t last_merge_count = 0;     // how often the last merged pair occurred
  bool stopped_early = false;             // fewer tokens than asked: no pair left at min_frequency

  std::size_t vocab_size() const { return tokens.size() + 1; }
};

// invalid_argument for vocab_size outside [257, 2^20].
result<trained_bpe> train_bpe(const piece_counts& counts, const train_options& o);

}  // namespace loom::tokenizer
