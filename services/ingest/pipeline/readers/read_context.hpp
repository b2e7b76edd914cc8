// Internal to the readers: the state one read_path/read_stream call threads
// through the format readers, and the format readers themselves. Not installed
// for other code: use reader.hpp. Single-threaded, lives for one call.
#pragma once

#include "services/ingest/pipeline/readers/reader.hpp"

#include <string>

namespace loom::ingest::detail {

struct read_context {
  const reader_options& opt;
  const read_callbacks& cb;
  read_stats stats;
  bool stopped = false;

  // False once the consumer asked to stop.
  bool emit(document& d) {
    if (stopped) return false;
    ++stats.documents;
    if (cb.on_document && !cb.on_document(d)) stopped = true;
    return !stopped;
  }
  void reject(const std::string& file, std::uint64_t line, reject_reason r, std::string message,
              doc_kind kind = doc_kind::text) {
    ++stats.rejections;
    if (cb.on_reject) cb.on_reject(rejection{file, line, r, std::move(message), kind});
  }
};

// Dispatch: one stream named `name` (its format from the name), `depth` archives deep.
void read_named(read_context& ctx, const std::string& name, byte_source& src, int depth);

// The format readers. `src` is positioned at the start of the (decompressed) content.
void read_text(read_context& ctx, const std::string& name, byte_source& src);
void read_markdown(read_context& ctx, const std::string& name, byte_source& src);
void read_html(read_context& ctx, const std::string& name, byte_source& src);
void read_jsonl(read_context& ctx, const std::string& name, byte_source& src);
void read_csv(read_context& ctx, const std::string& name, byte_source& src, char delimiter);
void read_archive(read_context& ctx, const std::string& name, byte_source& src, int depth);
// An image or audio file, whole (up to max_media_bytes), to read_callbacks::on_media.
void read_media(read_context& ctx, const std::string& name, byte_source& src, source_format kind);

// A read error of `src` as a rejection at `line`.
void reject_stream_error(read_context& ctx, const std::string& name, std::uint64_t line, const byte_source& src,
                         const error& e);

}  // namespace loom::ingest::detail
