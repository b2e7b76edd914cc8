#include "libs/tokenizer/pretokenize.hpp"

#include "libs/tokenizer/unicode_class.hpp"

#include <array>

namespace loom::tokenizer {
namespace {

using u8 = unsigned char;

// ASCII classes by byte; 0x80..0xFF are marked `non_ascii` and decoded.
constexpr std::uint8_t non_ascii = 4;
constexpr std::array<std::uint8_t, 256> ascii_class = [] {
  std::array<std::uint8_t, 256> t{};
  for (int b = 0; b < 256; ++b) {
    auto c = char_class::other;
    if ((b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')) c = char_class::letter;
    else if (b >= '0' && b <= '9') c = char_class::number;
    else if (b == ' ' || (b >= 0x09 && b <= 0x0D)) c = char_class::space;  // White_Space in ASCII
    t[b] = b >= 0x80 ? non_ascii : static_cast<std::uint8_t>(c);
  }
  return t;
}();

// Class and byte length of the character at p (invalid UTF-8: other, 1 byte).
inline char_class char_at(const u8* p, const u8* end, std::size_t& len) {
  const std::uint8_t a = ascii_class[*p];
  if (a != non_ascii) {
    len = 1;
    return static_cast<char_class>(a);
  }
  char32_t cp;
  len = decode_utf8(p, end, cp);
  if (len == 0) {
    len = 1;
    return char_class::other;
  }
  return classify(cp);
}

// End of the run of characters of class `c` that starts at p.
inline const u8* run_end(const u8* p, const u8* end, char_class c) {
  const auto want = static_cast<std::uint8_t>(c);
  while (p < end) {
    const std::uint8_t a = ascii_class[*p];
    if (a == want) {
      ++p;
      continue;
    }
    if (a != non_ascii) break;
    std::size_t len;
    if (char_at(p, end, len) != c) break;
    p += len;
  }
  return p;
}

// Length of the contraction at p ('s 't 're 've 'm 'll 'd, case-sensitive), else 0.
inline std::size_t contraction(const u8* p, const u8* end) {
  const std::size_t avail = static_cast<std::size_t>(end - p);
  if (avail < 2) return 0;
  switch (p[1]) {
    case 's': case 't': case 'm': case 'd': return 2;
    case 'r': case 'v': return avail >= 3 && p[2] == 'e' ? 3 : 0;
    case 'l': return avail >= 3 && p[2] == 'l' ? 3 : 0;
    default: return 0;
  }
}

}  // namespace

std::size_t piece_end(std::string_view text, std::size_t pos) {
  const u8* const begin = reinterpret_cast<const u8*>(text.data());
  const u8* const end = begin + text.size();
  const u8* p = begin + pos;

  if (*p == '\'') {
    if (std::size_t n = contraction(p, end)) return pos + n;
  }
  std::size_t len;
  const char_class c = char_at(p, end, len);
  if (c != char_class::space) return static_cast<std::size_t>(run_end(p + len, end, c) - begin);

  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`: one U+0020 joins the run after it.
  if (*p == ' ' && p + 1 < end) {
    std::size_t len1;
    const char_class c1 = char_at(p + 1, end, len1);
    if (c1 != char_class::space) return static_cast<std::size_t>(run_end(p + 1 + len1, end, c1) - begin);
  }

  // `\s+(?!\S)|\s+`: the whole run at the end of the text; before a non-space,
  // the run less its last character (which then starts the next piece), unless
  // the run is that one character.
  const u8* last = p;
  const u8* q = p + len;
  while (q < end) {
    std::size_t l;
    if (char_at(q, end, l) != char_class::space) break;
    last = q;
    q += l;
  }
  if (q == end || last == p) return static_cast<std::size_t>(q - begin);
  return static_cast<std::size_t>(last - begin);
}

std::vector<std::string_view> split_pieces(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t e = piece_end(text, pos);
    out.push_back(text.substr(pos, e - pos));
    pos = e;
  }
  return out;
}

}  // namespace loom::tokenizer
