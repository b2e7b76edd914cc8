// Readers: turn a path (file, directory, tar archive; gzip/zstd compressed or
// not) into documents, streaming. Formats: plain text, Markdown, HTML, JSONL
// (text records, SFT chat records, preference pairs), CSV/TSV. Whatever cannot
// be read becomes a reason-coded rejection and the import goes on with the rest.
// Memory per open file is bounded by max_line_bytes / max_document_bytes plus
// fixed buffers. Stateless functions; callbacks run on the calling thread.
#pragma once

#include "services/ingest/pipeline/document.hpp"
#include "services/ingest/pipeline/readers/byte_source.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace loom::ingest {

enum class source_format : std::uint8_t { text, markdown, html, jsonl, csv, tsv, archive, image, audio, unknown };
std::string_view to_string(source_format f);

// How plain text, Markdown and HTML become documents.
enum class text_split : std::uint8_t {
  file,       // one document per file (split at a line boundary when over max_document_bytes)
  paragraph,  // one per blank-line separated paragraph
  line,       // one per non-blank line
};

struct reader_options {
  std::size_t max_line_bytes = 16u << 20;      // longer lines/records: line_too_long, streamed past
  std::size_t max_document_bytes = 16u << 20;  // longer text: split into several documents
  text_split split = text_split::file;
  std::string jsonl_text_field = "text";       // field of a plain JSONL record
  std::string csv_text_column = "text";        // header name of the text column
  bool csv_header = true;                      // false: csv_column_index picks the column
  std::size_t csv_column_index = 0;
  std::size_t sniff_bytes = 8192;              // bytes looked at for binary detection
  double max_control_ratio = 0.05;             // control bytes / sniffed bytes above this: binary
  bool skip_hidden = true;                     // skip dot-files and dot-directories in directories
  int max_archive_depth = 2;                   // tar inside tar inside tar: refused
  // Non-empty: only what lies inside these directories is read (files/confine.hpp:
  // symbolic links are resolved, and a file is checked again once open). An
  // entry that leads outside (a link out of a directory) is an outside_roots
  // rejection naming it. Empty: no confinement (the command-line tool).
  std::vector<std::string> roots;
  // Extension (lower case, no dot, after stripping .gz/.zst) -> format. Files
  // without an extension, and NAME.gz, are plain text. Anything else is
  // unknown_format. Defaults: default_extensions().
  std::map<std::string, source_format, std::less<>> extensions;
  // Image and audio files (png jpg jpeg webp gif; wav flac ogg oga mp3) are read
  // whole, up to this size (a larger one is a media_too_large rejection, not
  // read), and handed to read_callbacks::on_media. Without that callback they
  // are unknown_format, as before media existed.
  std::uint64_t max_media_bytes = std::uint64_t{64} << 20;
  // Files the caller handles itself (caption sidecars and manifests): skipped
  // by the walk, not opened and not counted. Given the path as the walk names it.
  std::function<bool(const std::string& path)> claimed;
};

std::map<std::string, source_format, std::less<>> default_extensions();

struct read_stats {
  std::uint64_t files = 0;          // regular files (and archive members) opened
  std::uint64_t bytes_decoded = 0;  // bytes after decompression that readers looked at
  std::uint64_t documents = 0;
  std::uint64_t rejections = 0;
};

// An image or audio file (or archive member, named "archive!member"), whole.
struct media_file {
  std::string name;
  source_format kind = source_format::image;  // image or audio
  std::string bytes;
};

struct read_callbacks {
  // A document; the callee may move from it. Return false to stop the import.
  std::function<bool(document&)> on_document;
  std::function<void(const rejection&)> on_reject;
  // An image or audio file; the callee may move from it. Return false to stop.
  std::function<bool(media_file&)> on_media;
};

// Reads a file, directory (recursively, entries in byte order of their names)
// or archive at `path`.
read_stats read_path(const std::string& path, const reader_options& opt, const read_callbacks& cb);

// Reads one stream whose format is decided by `name` (as a file of that name).
read_stats read_stream(const std::string& name, byte_source& src, const reader_options& opt,
                       const read_callbacks& cb);

}  // namespace loom::ingest
