// HTML character references: named (&amp; and the HTML 4 set: Latin-1, Greek,
// punctuation, arrows, maths) and numeric (&#233; &#xE9;). Used by the HTML and
// Markdown readers. Immutable tables; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loom::ingest {

// The code point of a named reference without '&' and ';' ("eacute"), if known.
std::optional<char32_t> named_entity(std::string_view name);

// Decodes the reference `ref` (the text between '&' and ';') and appends its
// UTF-8 to `out`. False, appending nothing, when `ref` is not a reference.
// Numeric references to NUL, surrogates or past U+10FFFF become U+FFFD.
bool append_entity(std::string_view ref, std::string& out);

// Copies `in` to `out`, decoding every well-formed reference ("&amp;" -> "&").
void decode_entities(std::string_view in, std::string& out);

}  // namespace loom::ingest
