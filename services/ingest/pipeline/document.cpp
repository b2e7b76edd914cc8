#include "services/ingest/pipeline/document.hpp"

namespace loom::ingest {

std::string_view to_string(doc_kind k) {
  switch (k) {
    case doc_kind::text: return "text";
    case doc_kind::sft: return "sft";
    case doc_kind::preference: return "preference";
  }
  return "unknown";
}

std::string_view to_string(reject_reason r) {
  switch (r) {
    case reject_reason::io_error: return "io_error";
    case reject_reason::not_found: return "not_found";
    case reject_reason::unknown_format: return "unknown_format";
    case reject_reason::unsupported_file_type: return "unsupported_file_type";
    case reject_reason::binary_content: return "binary_content";
    case reject_reason::truncated_compression: return "truncated_compression";
    case reject_reason::corrupt_compression: return "corrupt_compression";
    case reject_reason::corrupt_archive: return "corrupt_archive";
    case reject_reason::archive_too_deep: return "archive_too_deep";
    case reject_reason::line_too_long: return "line_too_long";
    case reject_reason::json_parse_error: return "json_parse_error";
    case reject_reason::json_wrong_type: return "json_wrong_type";
    case reject_reason::json_missing_field: return "json_missing_field";
    case reject_reason::csv_unterminated_quote: return "csv_unterminated_quote";
    case reject_reason::csv_missing_column: return "csv_missing_column";
    case reject_reason::empty_file: return "empty_file";
    case reject_reason::empty_directory: return "empty_directory";
    case reject_reason::empty_archive: return "empty_archive";
    case reject_reason::outside_roots: return "outside_roots";
    case reject_reason::media_too_large: return "media_too_large";
  }
  return "unknown";
}

std::size_t text_bytes(const document& d) {
  std::size_t n = d.text.size() + d.prompt.size() + d.chosen.size() + d.rejected.size();
  for (const auto& t : d.messages) n += t.content.size();
  return n;
}

std::string joined_text(const document& d) {
  switch (d.kind) {
    case doc_kind::text: return d.text;
    case doc_kind::sft: {
      std::string out;
      for (const auto& t : d.messages) {
        if (!out.empty()) out += '\n';
        out += t.content;
      }
      return out;
    }
    case doc_kind::preference: return d.prompt + '\n' + d.chosen + '\n' + d.rejected;
  }
  return {};
}

}  // namespace loom::ingest
