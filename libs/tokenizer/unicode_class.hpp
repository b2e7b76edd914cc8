// Character classes of the GPT-2 pre-tokenizer (\p{L}, \p{N}, \s) and a strict
// UTF-8 decoder. Tables come from Unicode 16.0, the version tiktoken 1.0.22
// classifies by (unicode_tables.inc, generated). Pure functions; any thread.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::tokenizer {

enum class char_class : std::uint8_t {
  other = 0,   // [^\s\p{L}\p{N}], also every byte of invalid UTF-8
  letter = 1,  // \p{L}: Lu Ll Lt Lm Lo
  number = 2,  // \p{N}: Nd Nl No
  space = 3,   // \s: the White_Space property
};

// Class of a code point; REQUIRES: cp <= 0x10FFFF.
char_class classify(char32_t cp);

// Decodes one well-formed UTF-8 sequence (Unicode Table 3-7: no overlongs, no
// surrogates, nothing above U+10FFFF) at p. Returns its length 1..4 and sets cp,
// or 0 when the bytes at p do not start one. REQUIRES: p < end.
inline std::size_t decode_utf8(const unsigned char* p, const unsigned char* end, char32_t& cp) {
  const unsigned b0 = p[0];
  if (b0 < 0x80) {
    cp = b0;
    return 1;
  }
  const std::size_t avail = static_cast<std::size_t>(end - p);
  auto cont = [&](std::size_t i) { return i < avail && (p[i] & 0xC0) == 0x80; };
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    if (!cont(1)) return 0;
    cp = ((b0 & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    return 2;
  }
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    if (!cont(1) || !cont(2)) return 0;
    if (b0 == 0xE0 && p[1] < 0xA0) return 0;  // overlong
    if (b0 == 0xED && p[1] > 0x9F) return 0;  // surrogate
    cp = ((b0 & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    return 3;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    if (!cont(1) || !cont(2) || !cont(3)) return 0;
    if (b0 == 0xF0 && p[1] < 0x90) return 0;  // overlong
    if (b0 == 0xF4 && p[1] > 0x8F) return 0;  // above U+10FFFF
    cp = ((b0 & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    return 4;
  }
  return 0;
}

}  // namespace loom::tokenizer
