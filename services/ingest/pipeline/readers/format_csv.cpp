// CSV/TSV reader: RFC 4180 records (quoted fields may hold delimiters, doubled
// quotes and newlines; CRLF or LF), streamed byte by byte so a record spanning
// many lines never needs more than max_line_bytes. One document per row: the
// text column (by header name, or by index without a header). Lenient where
// RFC 4180 is strict: a quote inside an unquoted field is kept literally, and
// text after a closing quote is appended to the field.
#include "services/ingest/pipeline/readers/line_loop.hpp"

#include <vector>

namespace loom::ingest::detail {
namespace {

class csv_reader {
 public:
  csv_reader(read_context& ctx, const std::string& name, char delim)
      : ctx_(ctx), name_(name), delim_(delim), header_pending_(ctx.opt.csv_header),
        column_(ctx.opt.csv_header ? 0 : ctx.opt.csv_column_index) {}

  // False to stop reading (consumer stopped, or the header has no text column).
  bool feed(std::string_view chunk);
  void finish();

 private:
  enum class st : std::uint8_t { field_start, unquoted, quoted, quote_in_quoted };

  void start_record_if_needed() {
    if (!in_record_) {
      in_record_ = true;
      record_line_ = line_;
    }
  }
  void add(std::string_view bytes) {
    bytes_ += bytes.size();
    if (bytes_ > ctx_.opt.max_line_bytes) {
      if (!overflow_) std::vector<std::string>().swap(fields_);
      overflow_ = true;
      return;
    }
    if (header_pending_) {
      if (fields_.size() <= nfields_) fields_.resize(nfields_ + 1);
      fields_[nfields_].append(bytes);
    } else if (nfields_ == column_) {
      text_.append(bytes);
    }
  }
  void end_field() {
    ++nfields_;
    state_ = st::field_start;
  }
  bool end_record();

  read_context& ctx_;
  const std::string& name_;
  const char delim_;
  bool header_pending_;
  std::size_t column_;
  st state_ = st::field_start;
  bool in_record_ = false;
  bool overflow_ = false;
  bool field_touched_ = false;  // the current record has a delimiter or a quoted field
  std::uint64_t line_ = 1;
  std::uint64_t record_line_ = 1;
  std::uint64_t records_ = 0;
  std::size_t bytes_ = 0;
  std::size_t nfields_ = 0;
  std::vector<std::string> fields_;  // header row only
  std::string text_;
};

bool csv_reader::end_record() {
  end_field();
  const bool empty_line = nfields_ == 1 && !field_touched_ && bytes_ == 0;
  bool keep_going = true;
  if (empty_line) {
    // a blank line: not a record
  } else if (overflow_) {
    ctx_.reject(name_, record_line_, reject_reason::line_too_long, too_long_message(bytes_, ctx_.opt.max_line_bytes));
  } else if (header_pending_) {
    header_pending_ = false;
    if (!fields_.empty() && fields_[0].rfind("\xEF\xBB\xBF", 0) == 0) fields_[0].erase(0, 3);  // BOM
    std::size_t i = 0;
    while (i < fields_.size() && fields_[i] != ctx_.opt.csv_text_column) ++i;
    if (i == fields_.size()) {
      std::string cols;
      for (const auto& f : fields_) cols += (cols.empty() ? "" : ", ") + f.substr(0, 64);
      ctx_.reject(name_, record_line_, reject_reason::csv_missing_column,
                  "header has no column \"" + ctx_.opt.csv_text_column + "\" (columns: " + cols + ")");
      keep_going = false;
    }
    column_ = i;
    fields_.clear();
  } else if (nfields_ <= column_) {
    ++records_;
    ctx_.reject(name_, record_line_, reject_reason::csv_missing_column,
                "row has " + std::to_string(nfields_) + " fields; the text column is number " +
                    std::to_string(column_ + 1));
  } else {
    document d;
    d.source = name_;
    d.record = records_++;
    d.line = record_line_;
    d.text = std::move(text_);
    keep_going = ctx_.emit(d);
  }
  text_.clear();
  in_record_ = overflow_ = field_touched_ = false;
  bytes_ = nfields_ = 0;
  state_ = st::field_start;
  return keep_going;
}

bool csv_reader::feed(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    switch (state_) {
      case st::field_start:
        start_record_if_needed();
        if (c == '"') {
          state_ = st::quoted;
          field_touched_ = true;
          ++i;
          break;
        }
        state_ = st::unquoted;
        [[fallthrough]];
      case st::unquoted: {
        if (c == delim_) {
          field_touched_ = true;
          end_field();
          ++i;
        } else if (c == '\n') {
          ++line_;
          ++i;
          if (!end_record()) return false;
        } else if (c == '\r') {
          ++i;  // CRLF, or a stray CR: not text
        } else {
          std::size_t j = i + 1;
          while (j < s.size() && s[j] != delim_ && s[j] != '\n' && s[j] != '\r') ++j;
          add(s.substr(i, j - i));
          i = j;
        }
        break;
      }
      case st::quoted: {
        std::size_t j = i;
        while (j < s.size() && s[j] != '"' && s[j] != '\n') ++j;
        add(s.substr(i, j - i));
        if (j < s.size()) {
          if (s[j] == '\n') {
            ++line_;
            add("\n");
          } else {
            state_ = st::quote_in_quoted;
          }
          ++j;
        }
        i = j;
        break;
      }
      case st::quote_in_quoted:
        if (c == '"') {
          add("\"");
          state_ = st::quoted;
          ++i;
        } else {
          state_ = st::unquoted;  // closing quote; the field goes on until a delimiter
        }
        break;
    }
  }
  return true;
}

void csv_reader::finish() {
  if (state_ == st::quoted) {
    ctx_.reject(name_, record_line_, reject_reason::csv_unterminated_quote,
                "quoted field opened on line " + std::to_string(record_line_) + " is not closed at end of file");
    return;
  }
  if (in_record_) end_record();
}

}  // namespace

void read_csv(read_context& ctx, const std::string& name, byte_source& src, char delimiter) {
  csv_reader r(ctx, name, delimiter);
  std::vector<char> buf(256 * 1024);
  for (;;) {
    auto n = src.read(buf.data(), buf.size());
    if (!n.ok()) {
      reject_stream_error(ctx, name, 0, src, n.err());
      return;
    }
    if (*n == 0) break;
    if (!r.feed(std::string_view(buf.data(), *n))) return;
  }
  r.finish();
}

}  // namespace loom::ingest::detail
