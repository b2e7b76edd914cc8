// UTF-8 decoding per Unicode 15 table 3-7 (no overlongs, no surrogates, nothing
// past U+10FFFF) and repair: each maximal ill-formed subpart becomes one U+FFFD,
// the W3C/Unicode recommended practice. Stateless; any thread.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace loom::ingest::utf8 {

inline constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD

struct decoded {
  char32_t cp;      // the code point; U+FFFD when !valid
  unsigned len;     // bytes consumed (1..4); for an invalid sequence its maximal subpart
  bool valid;
};

// REQUIRES: p < end.
decoded decode(const unsigned char* p, const unsigned char* end);
void append(std::string& out, char32_t cp);
bool is_valid(std::string_view s);
// Writes `in` to `out` (cleared first) with every ill-formed subpart replaced by
// U+FFFD; returns the number of replacements.
std::size_t repair(std::string_view in, std::string& out);
// The longest prefix of s, at most n bytes, that does not cut a code point.
std::string_view truncate(std::string_view s, std::size_t n);

}  // namespace loom::ingest::utf8
