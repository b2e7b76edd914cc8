// What the `loom` commands print: text from outside (principals, job names and
// messages, dataset and file names, service errors, log lines) made safe for a
// terminal, and JSON lines that stay valid whatever bytes a string holds.
// Stateless functions; used from the main thread of each command.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::cli {

// `s` with every byte that could move the cursor, clear the screen or fake a
// line escaped: C0 controls (\n, \r, \t as such, others \xNN: ESC is \x1b),
// DEL, C1 controls (U+0080..U+009F), the Unicode line/paragraph separators and
// bidi overrides (as the \xNN of their UTF-8 bytes), bytes that are not valid
// UTF-8, and the backslash itself (\\, so an escape can't be forged). Valid
// UTF-8 text otherwise passes unchanged.
std::string printable(std::string_view s);

// A unix time in ns as "2026-12-03 18:20:00Z" (UTC), or "-" for 0.
std::string when(std::uint64_t unix_ns);

// printable() for our own error messages: the same, but a backslash passes as
// it is. Services and libraries already escape the outside text they quote
// (auth::printable: '\x0a'), and escaping that again would print '\\x0a'.
std::string printable_message(std::string_view s);

// Every line of `s` (split at '\n'), escaped with printable() and printed as
// indent + line + '\n'; "" for an empty `s`.
std::string indented_lines(std::string_view s, std::string_view indent);

// j.dump() on one line; invalid UTF-8 inside strings becomes U+FFFD instead of
// the exception nlohmann throws for it.
std::string json_text(const nlohmann::json& j);

// json_text(j) + '\n' on stdout, flushed.
void print_json(const nlohmann::json& j);

}  // namespace loom::cli
