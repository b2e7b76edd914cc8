#include "services/ingest/pipeline/readers/html_text.hpp"

#include "services/ingest/pipeline/readers/entities.hpp"

#include <algorithm>
#include <array>

namespace loom::ingest {
namespace {

constexpr std::size_t max_tag_name = 16;
constexpr std::size_t max_entity = 32;

bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f'; }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

template <std::size_t N>
bool one_of(std::string_view s, const std::array<std::string_view, N>& set) {
  return std::find(set.begin(), set.end(), s) != set.end();
}

// Elements whose contents are not text.
constexpr std::array<std::string_view, 8> skipped = {"script", "style", "noscript", "template",
                                                     "svg",    "math",  "iframe",   "object"};
// Elements that end a paragraph: a blank line.
constexpr std::array<std::string_view, 36> paragraph_blocks = {
    "p",       "div",   "h1",      "h2",     "h3",         "h4",      "h5",       "h6",     "ul",
    "ol",      "table", "section", "article", "header",    "footer",  "nav",      "aside",  "main",
    "blockquote", "pre", "figure", "figcaption", "form",   "fieldset", "address", "details", "summary",
    "dl",      "hr",    "title",   "caption", "center",    "menu",    "body",     "html",   "head"};
// Elements that end a line.
constexpr std::array<std::string_view, 6> line_blocks = {"br", "li", "tr", "dt", "dd", "option"};

}  // namespace

void html_to_text::emit(std::string_view bytes, std::string& out) {
  if (pending_space_ && !at_line_start_) out += ' ';
  pending_space_ = false;
  out.append(bytes);
  at_line_start_ = false;
  emitted_ = true;
  newlines_ = 0;
}

void html_to_text::space() { pending_space_ = true; }

void html_to_text::line_break(int n, std::string& out) {
  pending_space_ = false;
  if (!emitted_) return;
  while (newlines_ < n) {
    out += '\n';
    ++newlines_;
  }
  at_line_start_ = true;
}

void html_to_text::end_tag(std::string& out) {
  const std::string_view n = name_;
  if (!closing_ && !self_closing_ && one_of(n, skipped)) {
    raw_name_ = name_;
    raw_match_ = 0;
    st_ = st::raw;
    return;
  }
  st_ = st::text;
  if (n == "pre") pre_depth_ = closing_ ? std::max(0, pre_depth_ - 1) : pre_depth_ + 1;
  if (one_of(n, paragraph_blocks)) {
    line_break(2, out);
  } else if (one_of(n, line_blocks)) {
    line_break(1, out);
  } else if ((n == "td" || n == "th") && !closing_ && !at_line_start_) {
    pending_space_ = false;
    out += '\t';
  }
}

void html_to_text::feed(std::string_view in, std::string& out) {
  std::size_t i = 0;
  while (i < in.size()) {
    const char c = in[i];
    switch (st_) {
      case st::text: {
        if (c == '<') {
          st_ = st::lt;
          ++i;
        } else if (c == '&') {
          st_ = st::entity;
          entity_.clear();
          ++i;
        } else if (is_space(c)) {
          if (pre_depth_ > 0) {
            if (c == '\n') {
              pending_space_ = false;
              out += '\n';
              at_line_start_ = true;
              emitted_ = true;
              ++newlines_;
            } else if (c != '\r') {
              out += c;
            }
          } else {
            space();
          }
          ++i;
        } else {
          std::size_t j = i + 1;
          while (j < in.size() && in[j] != '<' && in[j] != '&' && !is_space(in[j])) ++j;
          emit(in.substr(i, j - i), out);
          i = j;
        }
        break;
      }
      case st::lt:
        if (is_alpha(c)) {
          name_.assign(1, lower(c));
          closing_ = self_closing_ = false;
          st_ = st::tag_name;
          ++i;
        } else if (c == '/') {
          st_ = st::lt_slash;
          ++i;
        } else if (c == '!') {
          st_ = st::bang;
          ++i;
        } else if (c == '?') {
          st_ = st::skip_to_gt;
          ++i;
        } else {
          st_ = st::text;  // a literal '<' ("a < b"); reprocess c as text
          emit("<", out);
        }
        break;
      case st::lt_slash:
        if (is_alpha(c)) {
          name_.assign(1, lower(c));
          closing_ = true;
          self_closing_ = false;
          st_ = st::tag_name;
        } else {
          st_ = st::skip_to_gt;
        }
        ++i;
        break;
      case st::tag_name:
        if (is_alpha(c) || (c >= '0' && c <= '9') || c == '-' || c == ':') {
          if (name_.size() < max_tag_name) name_ += lower(c);
        } else if (c == '>') {
          end_tag(out);
        } else {
          self_closing_ = c == '/';
          st_ = st::attrs;
        }
        ++i;
        break;
      case st::attrs:
        if (c == '>') {
          end_tag(out);
        } else if (c == '"' || c == '\'') {
          quote_ = c;
          st_ = st::attr_quote;
        } else if (!is_space(c)) {
          self_closing_ = c == '/';
        }
        ++i;
        break;
      case st::attr_quote:
        if (c == quote_) st_ = st::attrs;
        ++i;
        break;
      case st::bang:
        st_ = c == '-' ? st::bang_dash : (c == '>' ? st::text : st::skip_to_gt);
        ++i;
        break;
      case st::bang_dash:
        if (c == '-') {
          st_ = st::comment;
          dashes_ = 0;
        } else {
          st_ = c == '>' ? st::text : st::skip_to_gt;
        }
        ++i;
        break;
      case st::comment:
        if (c == '-') {
          ++dashes_;
        } else {
          if (c == '>' && dashes_ >= 2) st_ = st::text;
          dashes_ = 0;
        }
        ++i;
        break;
      case st::skip_to_gt:
        if (c == '>') st_ = st::text;
        ++i;
        break;
      case st::raw: {
        // Fast skip to the next '<' when nothing is half matched.
        if (raw_match_ == 0 && c != '<') {
          std::size_t j = in.find('<', i);
          i = j == std::string_view::npos ? in.size() : j;
          break;
        }
        raw_char(c);
        ++i;
        break;
      }
      case st::entity:
        if ((is_alpha(c) || (c >= '0' && c <= '9') || c == '#') && entity_.size() < max_entity) {
          entity_ += c;
          ++i;
        } else if (c == ';') {
          std::string decoded;
          if (append_entity(entity_, decoded)) {
            emit(decoded, out);
          } else {
            emit("&" + entity_ + ";", out);
          }
          st_ = st::text;
          ++i;
        } else {
          // Not a reference: the text stands as written; reprocess c.
          emit("&" + entity_, out);
          st_ = st::text;
        }
        break;
    }
  }
}

void html_to_text::raw_char(char c) {
  // Matches "</" + raw_name_ + (space | '/' | '>'), case-insensitively.
  const std::size_t name_end = 2 + raw_name_.size();
  if (raw_match_ == 0) {
    raw_match_ = c == '<' ? 1 : 0;
  } else if (raw_match_ == 1) {
    raw_match_ = c == '/' ? 2 : (c == '<' ? 1 : 0);
  } else if (raw_match_ < name_end) {
    raw_match_ = lower(c) == raw_name_[raw_match_ - 2] ? raw_match_ + 1 : (c == '<' ? 1 : 0);
  } else {
    if (is_space(c) || c == '/' || c == '>') {
      name_ = raw_name_;
      closing_ = true;
      self_closing_ = false;
      raw_name_.clear();
      st_ = c == '>' ? st::text : st::attrs;
    }
    raw_match_ = c == '<' ? 1 : 0;
  }
}

void html_to_text::finish(std::string& out) {
  if (st_ == st::entity) emit("&" + entity_, out);
  else if (st_ == st::lt) emit("<", out);
  st_ = st::text;
}

}  // namespace loom::ingest
