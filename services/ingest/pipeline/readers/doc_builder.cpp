#include "services/ingest/pipeline/readers/doc_builder.hpp"

#include "services/ingest/pipeline/utf8.hpp"

namespace loom::ingest::detail {

bool doc_builder::has_text() const {
  for (char c : cur_)
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return true;
  return false;
}

bool doc_builder::flush() {
  if (has_text()) {
    document d;
    d.source = source_;
    d.record = record_++;
    d.line = first_line_;
    d.text = std::move(cur_);
    if (!ctx_.emit(d)) return false;
  }
  cur_.clear();
  first_line_ = 0;
  return !ctx_.stopped;
}

bool doc_builder::add_line(std::string_view line, std::uint64_t line_no) {
  const auto& opt = ctx_.opt;
  bool blank = true;
  for (char c : line)
    if (c != ' ' && c != '\t' && c != '\r') {
      blank = false;
      break;
    }
  switch (opt.split) {
    case text_split::line:
      if (blank) return !ctx_.stopped;
      break;
    case text_split::paragraph:
      if (blank) return flush();
      break;
    case text_split::file: break;
  }
  // Keep every document under the limit: flush at this line boundary, and cut a
  // line that alone is too long (max_line_bytes > max_document_bytes).
  while (cur_.size() + line.size() + 1 > opt.max_document_bytes) {
    if (!cur_.empty()) {
      if (!flush()) return false;
      continue;
    }
    std::string_view head = utf8::truncate(line, opt.max_document_bytes - 1);
    if (head.empty()) head = line.substr(0, opt.max_document_bytes - 1);
    cur_.assign(head);
    first_line_ = line_no;
    if (!flush()) return false;
    line.remove_prefix(head.size());
  }
  if (cur_.empty()) first_line_ = line_no;
  cur_.append(line);
  cur_ += '\n';
  if (opt.split == text_split::line) return flush();
  return true;
}

}  // namespace loom::ingest::detail
