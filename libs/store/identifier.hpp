// Private to libs/store: names spliced into SQL text (tables, columns, owners)
// must be plain identifiers, so no caller-supplied name can inject SQL.
#pragma once

#include <string_view>

namespace loom::store {

// [A-Za-z_][A-Za-z0-9_]*, at most 63 characters (PostgreSQL's limit).
inline bool is_identifier(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

}  // namespace loom::store
