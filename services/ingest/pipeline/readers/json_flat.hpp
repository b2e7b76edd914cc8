// A fast path for the commonest JSONL record: one object whose values are all
// scalars ({"text": "...", "id": 7}). Strings are decoded with a tight loop
// instead of a general JSON parser's per-character machinery. Anything else
// (nested values, escaped keys, a lone surrogate, invalid JSON) returns false,
// and the caller falls back to the full parser, which also words the errors.
// Stateless; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest::detail {

struct flat_field {
  enum class type : unsigned char { string, number, boolean, null };
  std::string_view key;  // raw key (keys with escapes are not on the fast path)
  type t = type::null;
  std::string value;     // decoded string; the literal text for the others
};

// On true, `out` holds the members in order. String bytes are copied as they
// are, ill-formed UTF-8 included: cleaning repairs and counts it later.
bool parse_flat_object(std::string_view line, std::vector<flat_field>& out);

// JSON's name of a type, as nlohmann::json::type_name() spells it.
std::string_view type_name(flat_field::type t);

}  // namespace loom::ingest::detail
