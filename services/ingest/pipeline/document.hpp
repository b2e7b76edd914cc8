// What the ingest readers yield: documents (text, SFT chat, preference pair) and
// reason-coded rejections for what could not be read. Plain value types, owned by
// whoever holds them; no shared state, so any thread may use its own copies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::ingest {

enum class doc_kind : std::uint8_t { text, sft, preference };
std::string_view to_string(doc_kind k);

struct chat_turn {
  std::string role;     // "system" | "user" | "assistant" (checked by annotation.hpp, not here)
  std::string content;
};

struct document {
  std::string source;        // file path; inside an archive "dir/a.tar!inner/x.txt"
  std::uint64_t record = 0;  // 0-based index of this document within its source
  std::uint64_t line = 0;    // 1-based line where it starts; 0 where lines mean nothing (HTML)
  doc_kind kind = doc_kind::text;
  std::string text;                      // kind == text
  std::vector<chat_turn> messages;       // kind == sft
  std::string prompt, chosen, rejected;  // kind == preference
};

// Calls fn(std::string&) on every text field of `d`: text; each turn's content
// (not the role); prompt, chosen, rejected.
template <class Fn>
void for_each_field(document& d, Fn&& fn) {
  switch (d.kind) {
    case doc_kind::text: fn(d.text); break;
    case doc_kind::sft:
      for (auto& t : d.messages) fn(t.content);
      break;
    case doc_kind::preference:
      fn(d.prompt);
      fn(d.chosen);
      fn(d.rejected);
      break;
  }
}

// Bytes of text in all fields of `d`.
std::size_t text_bytes(const document& d);
// All text fields joined by '\n' (for scanners that want one string).
std::string joined_text(const document& d);

// Why a file, a line or a record could not be read. Stable names (to_string)
// go into reports and the rejects table.
enum class reject_reason : std::uint8_t {
  io_error,               // open/read/stat failed
  not_found,              // the path does not exist
  unknown_format,         // extension not handled by any reader
  unsupported_file_type,  // socket, fifo, device, broken symlink
  binary_content,         // NUL bytes or too many control characters
  truncated_compression,  // gzip/zstd stream ends early
  corrupt_compression,    // gzip/zstd data error
  corrupt_archive,        // libarchive could not read the tar
  archive_too_deep,       // archives nested deeper than reader_options::max_archive_depth
  line_too_long,          // a line/record over reader_options::max_line_bytes (skipped, streamed)
  json_parse_error,       // a JSONL line that is not JSON
  json_wrong_type,        // a JSONL field of the wrong JSON type (or a record that is not an object)
  json_missing_field,     // a JSONL record without the configured/required field
  csv_unterminated_quote, // a quoted CSV field still open at end of file
  csv_missing_column,     // header lacks the text column, or a row is too short
  empty_file,             // a file that yielded no document and no other rejection
  empty_directory,        // a directory with nothing to read
  empty_archive,          // an archive without regular files
  outside_roots,          // leads outside reader_options::roots (a symbolic link out): not read
  media_too_large,        // an image or audio file over reader_options::max_media_bytes: not read
};
std::string_view to_string(reject_reason r);

struct rejection {
  std::string file;
  std::uint64_t line = 0;  // 1-based; 0 = the whole file
  reject_reason reason = reject_reason::io_error;
  std::string message;
  doc_kind kind = doc_kind::text;  // what a JSONL record looked like (annotation pass rates count it)
};

}  // namespace loom::ingest
