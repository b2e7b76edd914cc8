// Internal lookup tables of the BPE encoder: a byte-string → rank map over the
// vocabulary and a (left, right) → merged-rank map over token pairs. Built once
// at load, read-only afterwards (safe to share across threads).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace loom::tokenizer::detail {

inline constexpr std::uint32_t no_rank = 0xFFFFFFFFu;

// Fast non-cryptographic hash for short byte strings (pieces are ~2-10 bytes).
inline std::uint64_t hash_bytes(const unsigned char* p, std::size_t n) {
  constexpr std::uint64_t k = 0x9E3779B97F4A7C15ull;
  std::uint64_t h = (n + 1) * k;
  auto mix = [&](std::uint64_t w) {
    h = (h ^ w) * k;
    h ^= h >> 31;
  };
  while (n >= 8) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    mix(w);
    p += 8;
    n -= 8;
  }
  if (n >= 4) {
    std::uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    mix((std::uint64_t{b} << 32) | a);
  } else if (n > 0) {
    mix(std::uint64_t{p[0]} | (std::uint64_t{p[n / 2]} << 8) | (std::uint64_t{p[n - 1]} << 16));
  }
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ull;
  return h ^ (h >> 32);
}

// a[0..n) == b[0..n) for the short keys of these tables, without a libc call:
// overlapping word loads never read outside either string.
inline bool same_bytes(const void* a, const void* b, std::size_t n) {
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  if (n >= 8) {
    if (n > 16) return std::memcmp(x, y, n) == 0;
    std::uint64_t x0, x1, y0, y1;
    std::memcpy(&x0, x, 8);
    std::memcpy(&y0, y, 8);
    std::memcpy(&x1, x + n - 8, 8);
    std::memcpy(&y1, y + n - 8, 8);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  if (n >= 4) {
    std::uint32_t x0, x1, y0, y1;
    std::memcpy(&x0, x, 4);
    std::memcpy(&y0, y, 4);
    std::memcpy(&x1, x + n - 4, 4);
    std::memcpy(&y1, y + n - 4, 4);
    return ((x0 ^ y0) | (x1 ^ y1)) == 0;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return false;
  return true;
}

// Vocabulary: token bytes by rank, and the reverse map. Ranks are dense 0..size()-1.
class token_map {
 public:
  // REQUIRES: offsets.size() == number of tokens + 1; token i is arena[offsets[i], offsets[i+1]).
  void build(std::string arena, std::vector<std::uint32_t> offsets);

  std::uint32_t find(const unsigned char* p, std::size_t n, std::uint64_t h) const {
    const std::uint32_t tag = static_cast<std::uint32_t>(h >> 32);
    for (std::size_t i = h & mask_;; i = (i + 1) & mask_) {
      const slot s = slots_[i];
      if (s.rank == no_rank) return no_rank;
      if (s.tag == tag && offsets_[s.rank + 1] - offsets_[s.rank] == n &&
          same_bytes(arena_.data() + offsets_[s.rank], p, n))
        return s.rank;
    }
  }
  std::size_t size() const { return offsets_.empty() ? 0 : offsets_.size() - 1; }
  std::string_view bytes(std::uint32_t rank) const {
    return {arena_.data() + offsets_[rank], offsets_[rank + 1] - offsets_[rank]};
  }
  std::size_t max_len() const { return max_len_; }

 private:
  struct slot {
    std::uint32_t tag = 0;
    std::uint32_t rank = no_rank;
  };
  std::string arena_;
  std::vector<std::uint32_t> offsets_;
  std::vector<slot> slots_;
  std::size_t mask_ = 0, max_len_ = 0;
};

// Pair map: rank of bytes(a) + bytes(b) when that is a token. Holds every split
// of every token into two tokens, which is exactly what tiktoken's merge loop
// can look up (its parts are always tokens).
class pair_map {
 public:
  void build(const token_map& tokens);
  // Only the listed pairs (Hugging Face's merges: a piece merges by these and
  // no other split). REQUIRES: no (a, b) twice.
  struct entry {
    std::uint32_t a, b, merged;
  };
  void build(const std::vector<entry>& entries);

  std::uint32_t find(std::uint32_t a, std::uint32_t b) const {
    for (std::size_t i = hash(a, b) & mask_;; i = (i + 1) & mask_) {
      const slot& s = slots_[i];
      if (s.merged == no_rank) return no_rank;
      if (s.a == a && s.b == b) return s.merged;
    }
  }
  std::size_t size() const { return count_; }

 private:
  struct slot {
    std::uint32_t a = 0, b = 0, merged = no_rank;
  };
  static std::uint64_t hash(std::uint32_t a, std::uint32_t b) {
    const std::uint64_t x = ((std::uint64_t{a} << 32) | b) * 0x9E3779B97F4A7C15ull;
    return x ^ (x >> 29);
  }
  std::vector<slot> slots_;
  std::size_t mask_ = 0, count_ = 0;
};

}  // namespace loom::tokenizer::detail
