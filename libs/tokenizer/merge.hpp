// The BPE merge step on one piece, with tiktoken's rule: start from one token
// per byte, then repeatedly merge the adjacent pair whose concatenation has the
// lowest rank (the leftmost such pair on ties) until no pair is a token.
// Two implementations with identical results: a scan for short pieces, and a
// linked list + heap, O(n log n), for long ones (1 MB without a space).
#pragma once

#include "libs/tokenizer/tables.hpp"

#include <array>
#include <cstdint>
#include <vector>

namespace loom::tokenizer::detail {

// Pieces up to this many bytes use the scan: O(n^2) but no heap, and nearly
// every piece of real text is shorter (English averages ~4 bytes).
inline constexpr std::size_t small_piece_max = 48;

struct merge_tables {
  std::array<std::uint32_t, 256> byte_rank{};  // the single-byte tokens
  pair_map pairs;
};

// Reused buffers of the heap path; one per thread (not shared).
struct merge_scratch {
  std::vector<std::uint32_t> tok, next, prev;
  std::vector<std::uint64_t> heap;
};

// Append the ids of piece p[0..n) to out. REQUIRES: 1 <= n < 2^32 - 1.
void merge_scan(const merge_tables& t, const unsigned char* p, std::size_t n, std::vector<std::uint32_t>& out);
void merge_heap(const merge_tables& t, const unsigned char* p, std::size_t n, std::vector<std::uint32_t>& out,
                merge_scratch& s);

inline void merge_piece(const merge_tables& t, const unsigned char* p, std::size_t n, std::vector<std::uint32_t>& out,
                        merge_scratch& s) {
  if (n <= small_piece_max) merge_scan(t, p, n, out);
  else merge_heap(t, p, n, out, s);
}

}  // namespace loom::tokenizer::detail
