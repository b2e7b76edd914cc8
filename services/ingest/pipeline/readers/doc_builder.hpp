// Internal to the readers: gathers the lines of one text/Markdown/HTML source
// into documents according to reader_options::split, never letting one grow
// past max_document_bytes. Single-threaded; one per source.
#pragma once

#include "services/ingest/pipeline/readers/read_context.hpp"

#include <string>
#include <string_view>

namespace loom::ingest::detail {

class doc_builder {
 public:
  doc_builder(read_context& ctx, std::string source) : ctx_(ctx), source_(std::move(source)) {}

  // One line of text (no '\n'); `line_no` is 1-based, 0 if unknown. False once
  // the consumer asked to stop.
  bool add_line(std::string_view line, std::uint64_t line_no);
  // Emits what is gathered. False once the consumer asked to stop.
  bool flush();

 private:
  bool has_text() const;

  read_context& ctx_;
  std::string source_;
  std::string cur_;
  std::uint64_t first_line_ = 0;
  std::uint64_t record_ = 0;
};

}  // namespace loom::ingest::detail
