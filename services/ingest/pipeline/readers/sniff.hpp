// What a stream is, from its name and its first bytes: the format and
// compression a name implies, and binary detection. Stateless; any thread.
#pragma once

#include "services/ingest/pipeline/readers/decompress.hpp"
#include "services/ingest/pipeline/readers/reader.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace loom::ingest {

struct name_format {
  source_format format = source_format::unknown;
  compression comp = compression::none;  // to undo before the format reader (never set for archives:
                                         // libarchive undoes its own compression)
};

// "a/b.jsonl.gz" -> {jsonl, gzip}; "x.gz" -> {text, gzip}; "x.tar.zst", "x.tgz" -> {archive, none};
// "README" -> {text, none}; "x.png" -> {unknown, none}.
name_format format_for_name(std::string_view name, const reader_options& opt);

// Why `head` (the first bytes of a stream) is binary, or nullopt when it looks
// like text: a NUL byte, or control bytes (other than \t \n \r \f \v ESC) over
// `max_control_ratio` of the bytes.
std::optional<std::string> binary_reason(std::string_view head, double max_control_ratio);

}  // namespace loom::ingest
