// Streaming HTML -> text. Drops markup, comments, declarations and the contents
// of script/style/noscript/template/svg/math/iframe/object; decodes character
// references; block elements become line breaks (paragraph-level ones a blank
// line), table cells tabs; whitespace collapses except inside <pre>. Holds only
// a few bytes of state between chunks, so input of any size streams through.
// One converter per document; single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::ingest {

class html_to_text {
 public:
  // Appends the text of the next chunk of HTML to `out`.
  void feed(std::string_view chunk, std::string& out);
  // Flushes a reference or '<' left open at the end of input.
  void finish(std::string& out);

 private:
  enum class st : std::uint8_t {
    text, lt, lt_slash, tag_name, attrs, attr_quote, bang, bang_dash, comment, skip_to_gt, raw, entity
  };
  void emit(std::string_view bytes, std::string& out);
  void space();
  void line_break(int n, std::string& out);
  void end_tag(std::string& out);
  void raw_char(char c);

  st st_ = st::text;
  std::string name_;        // current tag name, lower case, at most 16 chars
  bool closing_ = false;    // </name>
  bool self_closing_ = false;
  char quote_ = 0;
  int dashes_ = 0;          // consecutive '-' in a comment
  std::string raw_name_;    // element whose contents are skipped (script, style, ...)
  std::size_t raw_match_ = 0;
  std::string entity_;
  int pre_depth_ = 0;
  bool pending_space_ = false;
  bool at_line_start_ = true;
  bool emitted_ = false;    // any text yet (no breaks before the first text)
  int newlines_ = 0;        // consecutive '\n' just emitted
};

}  // namespace loom::ingest
