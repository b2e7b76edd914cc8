#include "services/ingest/pipeline/utf8.hpp"

namespace loom::ingest::utf8 {

decoded decode(const unsigned char* p, const unsigned char* end) {
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {b0, 1, true};
  unsigned need;
  unsigned char lo = 0x80, hi = 0xBF;
  char32_t cp;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;       // no overlongs
    else if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;       // no overlongs
    else if (b0 == 0xF4) hi = 0x8F;  // nothing past U+10FFFF
  } else {
    return {0xFFFD, 1, false};
  }
  for (unsigned i = 1; i <= need; ++i) {
    if (p + i >= end) return {0xFFFD, i, false};
    const unsigned char b = p[i];
    if (b < lo || b > hi) return {0xFFFD, i, false};
    lo = 0x80;
    hi = 0xBF;
    cp = (cp << 6) | (b & 0x3F);
  }
  return {cp, need + 1, true};
}

void append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      out += replacement;
      return;
    }
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp <= 0x10FFFF) {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += replacement;
  }
}

bool is_valid(std::string_view s) {
  auto p = reinterpret_cast<const unsigned char*>(s.data());
  auto end = p + s.size();
  while (p < end) {
    if (*p < 0x80) {
      ++p;
      continue;
    }
    auto d = decode(p, end);
    if (!d.valid) return false;
    p += d.len;
  }
  return true;
}

std::size_t repair(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size());
  std::size_t n = 0;
  auto p = reinterpret_cast<const unsigned char*>(in.data());
  auto end = p + in.size();
  while (p < end) {
    auto run = p;
    while (run < end && *run < 0x80) ++run;
    out.append(reinterpret_cast<const char*>(p), static_cast<std::size_t>(run - p));
    p = run;
    if (p == end) break;
    auto d = decode(p, end);
    if (d.valid) {
      out.append(reinterpret_cast<const char*>(p), d.len);
    } else {
      out += replacement;
      ++n;
    }
    p += d.len;
  }
  return n;
}

std::string_view truncate(std::string_view s, std::size_t n) {
  if (s.size() <= n) return s;
  std::size_t i = n;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return s.substr(0, i);
}

}  // namespace loom::ingest::utf8
