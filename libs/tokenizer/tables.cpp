#include "libs/tokenizer/tables.hpp"

#include <algorithm>
#include <bit>

namespace loom::tokenizer::detail {
namespace {

// Open addressing at load factor <= 1/2 keeps probe chains ~1.5 slots.
std::size_t table_size(std::size_t n) { return std::bit_ceil(std::max<std::size_t>(16, n * 2)); }

}  // namespace

void token_map::build(std::string arena, std::vector<std::uint32_t> offsets) {
  arena_ = std::move(arena);
  offsets_ = std::move(offsets);
  const std::size_t n = size();
  slots_.assign(table_size(n), slot{});
  mask_ = slots_.size() - 1;
  max_len_ = 0;
  for (std::uint32_t r = 0; r < n; ++r) {
    const auto b = bytes(r);
    max_len_ = std::max(max_len_, b.size());
    const std::uint64_t h = hash_bytes(reinterpret_cast<const unsigned char*>(b.data()), b.size());
    std::size_t i = h & mask_;
    while (slots_[i].rank != no_rank) i = (i + 1) & mask_;
    slots_[i] = slot{static_cast<std::uint32_t>(h >> 32), r};
  }
}

void pair_map::build(const token_map& tokens) {
  std::vector<entry> entries;
  for (std::uint32_t r = 0; r < tokens.size(); ++r) {
    const auto t = tokens.bytes(r);
    const auto* p = reinterpret_cast<const unsigned char*>(t.data());
    for (std::size_t k = 1; k < t.size(); ++k) {
      const std::uint32_t a = tokens.find(p, k, hash_bytes(p, k));
      if (a == no_rank) continue;
      const std::uint32_t b = tokens.find(p + k, t.size() - k, hash_bytes(p + k, t.size() - k));
      if (b != no_rank) entries.push_back({a, b, r});
    }
  }
  build(entries);
}

void pair_map::build(const std::vector<entry>& entries) {
  slots_.assign(table_size(entries.size()), slot{});
  mask_ = slots_.size() - 1;
  count_ = entries.size();
  for (const auto& e : entries) {
    std::size_t i = hash(e.a, e.b) & mask_;
    while (slots_[i].merged != no_rank) i = (i + 1) & mask_;
    slots_[i] = slot{e.a, e.b, e.merged};
  }
}

}  // namespace loom::tokenizer::detail
