#include "libs/tokenizer/unicode_class.hpp"

#include <array>
#include <vector>

namespace loom::tokenizer {
namespace {

struct class_range {
  char32_t first, last;
  char_class cls;
};

constexpr class_range ranges[] = {
#include "libs/tokenizer/unicode_tables.inc"
};

// Two-stage table: stage1[cp >> 8] picks one of the distinct 256-entry blocks
// (a few hundred of them), so a lookup is two loads with no search.
struct class_table {
  std::array<std::uint16_t, 0x1100> stage1{};
  std::vector<std::array<char_class, 256>> blocks;

  class_table() {
    std::array<char_class, 256> block{};
    std::size_t r = 0;
    for (char32_t hi = 0; hi < 0x1100; ++hi) {
      for (char32_t lo = 0; lo < 256; ++lo) {
        const char32_t cp = (hi << 8) | lo;
        while (r < std::size(ranges) && ranges[r].last < cp) ++r;
        block[lo] = (r < std::size(ranges) && ranges[r].first <= cp) ? ranges[r].cls : char_class::other;
      }
      std::size_t id = 0;
      while (id < blocks.size() && blocks[id] != block) ++id;
      if (id == blocks.size()) blocks.push_back(block);
      stage1[hi] = static_cast<std::uint16_t>(id);
    }
  }
};

const class_table& table() {
  static const class_table t;
  return t;
}

}  // namespace

char_class classify(char32_t cp) {
  const auto& t = table();
  return t.blocks[t.stage1[cp >> 8]][cp & 0xFF];
}

}  // namespace loom::tokenizer
