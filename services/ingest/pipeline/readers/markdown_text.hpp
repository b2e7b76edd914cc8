// Markdown -> text, one line at a time (so files stream). Keeps the words and
// the paragraph structure; drops the markup: heading marks, emphasis, code
// spans' backticks, fences (their code is kept verbatim), link/image syntax
// (their text/alt is kept), raw HTML tags and comments, reference definitions,
// thematic breaks, setext underlines, table separators (cells become tabs),
// YAML front matter, blockquote marks. List items become "- item".
// One converter per document; single-threaded.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::ingest {

class markdown_to_text {
 public:
  // Appends the text of one input line (without '\n'), plus '\n', to `out`;
  // nothing for a line that is all markup.
  void line(std::string_view in, std::string& out);

 private:
  std::uint64_t number_ = 0;
  bool front_matter_ = false;
  bool in_comment_ = false;
  char fence_char_ = 0;       // '`' or '~' while inside a fenced block
  std::size_t fence_len_ = 0;
};

// Inline markup of one line of Markdown -> text, appended to `out`.
void markdown_inline(std::string_view in, std::string& out);

}  // namespace loom::ingest
