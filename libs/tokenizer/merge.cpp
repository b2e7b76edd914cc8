#include "libs/tokenizer/merge.hpp"

#include <algorithm>
#include <functional>
#include <memory>

namespace loom::tokenizer::detail {

void merge_scan(const merge_tables& t, const unsigned char* p, std::size_t n, std::vector<std::uint32_t>& out) {
  // Parts as a list over fixed arrays (no shifting): tok[i] is a part, nxt[i]
  // the next part, rk[i] the rank of merging tok[i] with tok[nxt[i]].
  std::uint32_t stack_buf[3 * small_piece_max];
  std::unique_ptr<std::uint32_t[]> heap_buf;
  std::uint32_t* buf = stack_buf;
  if (n > small_piece_max) {  // correct for any n, only slower; tests use it as the reference
    heap_buf = std::make_unique<std::uint32_t[]>(3 * n);
    buf = heap_buf.get();
  }
  std::uint32_t* tok = buf;
  std::uint32_t* rk = buf + n;
  std::uint32_t* nxt = buf + 2 * n;
  const auto end = static_cast<std::uint32_t>(n);
  for (std::uint32_t i = 0; i < end; ++i) {
    tok[i] = t.byte_rank[p[i]];
    nxt[i] = i + 1;
  }
  for (std::uint32_t i = 0; i + 1 < end; ++i) rk[i] = t.pairs.find(tok[i], tok[i + 1]);
  rk[end - 1] = no_rank;
  for (;;) {
    std::uint32_t best = end, best_prev = end, prev = end;
    std::uint32_t br = no_rank;
    for (std::uint32_t i = 0; i != end; prev = i, i = nxt[i])
      if (rk[i] < br) {
        br = rk[i];
        best = i;
        best_prev = prev;
      }
    if (br == no_rank) break;
    tok[best] = br;
    nxt[best] = nxt[nxt[best]];
    rk[best] = nxt[best] != end ? t.pairs.find(br, tok[nxt[best]]) : no_rank;
    if (best_prev != end) rk[best_prev] = t.pairs.find(tok[best_prev], br);
  }
  for (std::uint32_t i = 0; i != end; i = nxt[i]) out.push_back(tok[i]);
}

void merge_heap(const merge_tables& t, const unsigned char* p, std::size_t n, std::vector<std::uint32_t>& out,
                merge_scratch& s) {
  // Nodes are byte positions; a merged-away node has tok == no_rank. Heap entries
  // are (rank << 32 | left node), so the smallest is the lowest rank, leftmost on
  // ties, exactly tiktoken's choice. Entries go stale when a neighbour merges;
  // they are recognised on pop by re-reading the pair's current rank.
  constexpr std::uint32_t none = 0xFFFFFFFFu;
  s.tok.resize(n);
  s.next.resize(n);
  s.prev.resize(n);
  s.heap.clear();
  auto* tok = s.tok.data();
  auto* next = s.next.data();
  auto* prev = s.prev.data();
  for (std::size_t i = 0; i < n; ++i) {
    tok[i] = t.byte_rank[p[i]];
    next[i] = i + 1 < n ? static_cast<std::uint32_t>(i + 1) : none;
    prev[i] = i > 0 ? static_cast<std::uint32_t>(i - 1) : none;
  }
  const auto push = [&](std::uint32_t rank, std::uint32_t left) {
    s.heap.push_back((std::uint64_t{rank} << 32) | left);
    std::push_heap(s.heap.begin(), s.heap.end(), std::greater<>());
  };
  for (std::size_t i = 0; i + 1 < n; ++i)
    if (auto r = t.pairs.find(tok[i], tok[i + 1]); r != no_rank)
      s.heap.push_back((std::uint64_t{r} << 32) | i);
  std::make_heap(s.heap.begin(), s.heap.end(), std::greater<>());

  while (!s.heap.empty()) {
    std::pop_heap(s.heap.begin(), s.heap.end(), std::greater<>());
    const std::uint64_t top = s.heap.back();
    s.heap.pop_back();
    const auto rank = static_cast<std::uint32_t>(top >> 32);
    const auto i = static_cast<std::uint32_t>(top);
    const std::uint32_t j = next[i];
    if (tok[i] == no_rank || j == none || t.pairs.find(tok[i], tok[j]) != rank) continue;  // stale
    tok[i] = rank;
    tok[j] = no_rank;
    next[i] = next[j];
    if (next[j] != none) prev[next[j]] = i;
    if (prev[i] != none)
      if (auto r = t.pairs.find(tok[prev[i]], tok[i]); r != no_rank) push(r, prev[i]);
    if (next[i] != none)
      if (auto r = t.pairs.find(tok[i], tok[next[i]]); r != no_rank) push(r, i);
  }
  for (std::uint32_t i = 0; i != none; i = next[i]) out.push_back(tok[i]);
}

}  // namespace loom::tokenizer::detail
