#include "client/output.hpp"
#include "libs/status/unix_time.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <iostream>

namespace loom::cli {
namespace {

void hex(std::string& out, unsigned char ch) {
  static const char digits[] = "0123456789abcdef";
  out += "\\x";
  out += digits[ch >> 4];
  out += digits[ch & 15];
}

// Length of the valid UTF-8 sequence at s[i] (2..4) and its code point; 0 when
// s[i] does not start one (stray continuation, overlong, surrogate, > U+10FFFF).
std::size_t utf8_sequence(std::string_view s, std::size_t i, char32_t& cp) {
  const auto b = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  std::size_t n = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (n == 0 || c > 0xf4 || i + n > s.size()) return 0;
  cp = c & (0x7f >> n);
  for (std::size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b(k) & 0x3f);
  }
  const char32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

// Code points a terminal acts on or that reorder or break what is shown.
bool unsafe(char32_t cp) {
  return (cp >= 0x80 && cp <= 0x9f) || cp == 0x2028 || cp == 0x2029 || (cp >= 0x202a && cp <= 0x202e) ||
         (cp >= 0x2066 && cp <= 0x2069);
}

}  // namespace

namespace {
std::string escaped(std::string_view s, bool double_backslash);
}  // namespace

std::string printable(std::string_view s) { return escaped(s, true); }
std::string printable_message(std::string_view s) { return escaped(s, false); }

namespace {
std::string escaped(std::string_view s, bool double_backslash) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if (ch >= 0x20 && ch < 0x7f) {
      if (ch == '\\' && double_backslash) out += '\\';
      out += static_cast<char>(ch);
      ++i;
    } else if (ch == '\n' || ch == '\r' || ch == '\t') {
      out += ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : "\\t";
      ++i;
    } else if (ch < 0x80) {  // the other C0 controls and DEL
      hex(out, ch);
      ++i;
    } else {
      char32_t cp = 0;
      const std::size_t n = utf8_sequence(s, i, cp);
      if (n == 0) {
        hex(out, ch);
        ++i;
        continue;
      }
      if (unsafe(cp))
        for (std::size_t k = 0; k < n; ++k) hex(out, static_cast<unsigned char>(s[i + k]));
      else
        out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}
}  // namespace

std::string indented_lines(std::string_view s, std::string_view indent) {
  std::string out;
  for (std::size_t pos = 0; pos < s.size();) {
    std::size_t end = s.find('\n', pos);
    if (end == std::string_view::npos) end = s.size();
    out.append(indent);
    out += printable(s.substr(pos, end - pos));
    out += '\n';
    pos = end + 1;
  }
  return out;
}

std::string json_text(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_json(const nlohmann::json& j) { std::cout << json_text(j) << std::endl; }

std::string when(std::uint64_t unix_ns) {
  if (unix_ns == 0) return "-";
  return utc_text(static_cast<std::int64_t>(unix_ns / 1'000'000'000ULL), ' ');
}

}  // namespace loom::cli
