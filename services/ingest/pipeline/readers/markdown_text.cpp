#include "services/ingest/pipeline/readers/markdown_text.hpp"

#include "services/ingest/pipeline/readers/entities.hpp"

#include <cctype>

namespace loom::ingest {
namespace {

bool is_blank(std::string_view s) {
  for (char c : s)
    if (c != ' ' && c != '\t') return false;
  return true;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool is_alnum(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || static_cast<unsigned char>(c) >= 0x80; }
bool is_punct(char c) { return std::ispunct(static_cast<unsigned char>(c)) != 0; }

std::size_t run_of(std::string_view s, std::size_t i, char c) {
  std::size_t j = i;
  while (j < s.size() && s[j] == c) ++j;
  return j - i;
}

// "---", "***", "___", "===" (setext), with optional spaces.
bool is_rule(std::string_view t) {
  char c = 0;
  std::size_t n = 0;
  for (char x : t) {
    if (x == ' ' || x == '\t') continue;
    if (x != '-' && x != '=' && x != '*' && x != '_') return false;
    if (c && x != c) return false;
    c = x;
    ++n;
  }
  return n >= ((c == '-' || c == '=') ? 2u : 3u);
}

// Index of the ']' closing the '[' at `open`, honouring nesting and escapes.
std::size_t close_bracket(std::string_view s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '[') ++depth;
    else if (s[i] == ']' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

std::size_t close_paren(std::string_view s, std::size_t open) {
  int depth = 0;
  for (std::size_t i = open; i < s.size(); ++i) {
    if (s[i] == '\\') ++i;
    else if (s[i] == '(') ++depth;
    else if (s[i] == ')' && --depth == 0) return i;
  }
  return std::string_view::npos;
}

// [text](url), [text][ref], [text][]: the end index (exclusive) of the link, or npos.
std::size_t link_end(std::string_view s, std::size_t open, std::size_t close) {
  if (close + 1 >= s.size()) return std::string_view::npos;
  if (s[close + 1] == '(') {
    std::size_t p = close_paren(s, close + 1);
    return p == std::string_view::npos ? p : p + 1;
  }
  if (s[close + 1] == '[') {
    std::size_t p = s.find(']', close + 2);
    return p == std::string_view::npos ? p : p + 1;
  }
  (void)open;
  return std::string_view::npos;
}

}  // namespace

void markdown_inline(std::string_view s, std::string& out) {
  std::size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    switch (c) {
      case '\\':
        if (i + 1 < s.size() && is_punct(s[i + 1])) {
          out += s[i + 1];
          i += 2;
        } else {
          out += c;
          ++i;
        }
        break;
      case '`': {
        std::size_t n = run_of(s, i, '`');
        std::size_t j = i + n;
        std::size_t close = std::string_view::npos;
        while (j < s.size()) {
          std::size_t k = s.find('`', j);
          if (k == std::string_view::npos) break;
          std::size_t m = run_of(s, k, '`');
          if (m == n) {
            close = k;
            break;
          }
          j = k + m;
        }
        if (close == std::string_view::npos) {
          out.append(s.substr(i, n));
          i += n;
        } else {
          std::string_view code = s.substr(i + n, close - i - n);
          if (code.size() >= 2 && code.front() == ' ' && code.back() == ' ') code = code.substr(1, code.size() - 2);
          out.append(code);
          i = close + n;
        }
        break;
      }
      case '!':
      case '[': {
        std::size_t open = c == '!' ? i + 1 : i;
        if (open >= s.size() || s[open] != '[') {
          out += c;
          ++i;
          break;
        }
        std::size_t close = close_bracket(s, open);
        std::size_t end = close == std::string_view::npos ? close : link_end(s, open, close);
        if (end == std::string_view::npos) {
          out += c;
          ++i;
          break;
        }
        markdown_inline(s.substr(open + 1, close - open - 1), out);
        i = end;
        break;
      }
      case '<': {
        std::size_t close = s.find('>', i + 1);
        if (close == std::string_view::npos) {
          out += c;
          ++i;
          break;
        }
        std::string_view inner = s.substr(i + 1, close - i - 1);
        bool autolink = inner.find("://") != std::string_view::npos || inner.rfind("mailto:", 0) == 0;
        bool tag = !inner.empty() && (std::isalpha(static_cast<unsigned char>(inner[0])) || inner[0] == '/' || inner[0] == '!') &&
                   inner.find(' ') != 0;
        if (autolink && inner.find(' ') == std::string_view::npos) {
          out.append(inner);
          i = close + 1;
        } else if (tag) {
          i = close + 1;  // raw HTML: dropped
        } else {
          out += c;
          ++i;
        }
        break;
      }
      case '*':
      case '_':
      case '~': {
        std::size_t n = run_of(s, i, c);
        char prev = i > 0 ? s[i - 1] : ' ';
        char next = i + n < s.size() ? s[i + n] : ' ';
        bool prev_space = prev == ' ' || prev == '\t';
        bool next_space = next == ' ' || next == '\t';
        bool literal;
        if (c == '*') literal = prev_space && next_space;                // "2 * 3"
        else if (c == '_') literal = (is_alnum(prev) && is_alnum(next)) || (prev_space && next_space);  // snake_case
        else literal = n < 2;                                             // "~" alone
        if (literal) out.append(s.substr(i, n));
        i += n;
        break;
      }
      case '&': {
        std::size_t semi = s.find(';', i + 1);
        if (semi != std::string_view::npos && semi - i <= 12 && append_entity(s.substr(i + 1, semi - i - 1), out)) {
          i = semi + 1;
        } else {
          out += c;
          ++i;
        }
        break;
      }
      default: {
        std::size_t j = i + 1;
        while (j < s.size()) {
          char d = s[j];
          if (d == '\\' || d == '`' || d == '!' || d == '[' || d == '<' || d == '*' || d == '_' || d == '~' || d == '&') break;
          ++j;
        }
        out.append(s.substr(i, j - i));
        i = j;
      }
    }
  }
}

void markdown_to_text::line(std::string_view in, std::string& out) {
  ++number_;
  std::string_view t = in;
  for (int k = 0; k < 3 && !t.empty() && t.front() == ' '; ++k) t.remove_prefix(1);

  if (number_ == 1 && trim(in) == "---") {
    front_matter_ = true;
    return;
  }
  if (front_matter_) {
    std::string_view x = trim(in);
    if (x == "---" || x == "...") front_matter_ = false;
    return;
  }
  if (fence_char_) {
    if (run_of(t, 0, fence_char_) >= fence_len_ && is_blank(t.substr(run_of(t, 0, fence_char_)))) {
      fence_char_ = 0;
      return;
    }
    out.append(in);  // code is kept verbatim
    out += '\n';
    return;
  }
  if (t.rfind("```", 0) == 0 || t.rfind("~~~", 0) == 0) {
    fence_char_ = t[0];
    fence_len_ = run_of(t, 0, t[0]);
    return;
  }
  if (in_comment_) {
    std::size_t e = t.find("-->");
    if (e == std::string_view::npos) return;
    in_comment_ = false;
    t = t.substr(e + 3);
    if (is_blank(t)) return;
  }
  if (is_blank(t)) {
    out += '\n';
    return;
  }
  // HTML comments on this line; one left open swallows the following lines.
  std::string no_comments;
  for (std::size_t b = t.find("<!--"); b != std::string_view::npos; b = t.find("<!--")) {
    std::string next(t.substr(0, b));
    std::size_t e = t.find("-->", b + 4);
    if (e == std::string_view::npos) in_comment_ = true;
    else next.append(t.substr(e + 3));
    no_comments.swap(next);
    t = no_comments;
    if (in_comment_) break;
  }
  if (is_blank(t)) return;  // the line was only a comment
  if (is_rule(t)) return;
  // Link reference definition: [id]: url
  if (t.front() == '[') {
    std::size_t close = t.find("]:");
    if (close != std::string_view::npos && t.find('[', 1) > close) return;
  }
  while (!t.empty() && t.front() == '>') {
    t.remove_prefix(1);
    if (!t.empty() && t.front() == ' ') t.remove_prefix(1);
  }
  t = trim(t);
  if (t.empty()) {
    out += '\n';
    return;
  }
  if (t.front() == '#') {
    std::size_t n = run_of(t, 0, '#');
    if (n <= 6 && (n == t.size() || t[n] == ' ' || t[n] == '\t')) {
      t = trim(t.substr(n));
      std::size_t k = t.size();
      while (k > 0 && t[k - 1] == '#') --k;
      if (k == 0 || t[k - 1] == ' ') t = trim(t.substr(0, k));
    }
  } else if ((t.front() == '-' || t.front() == '*' || t.front() == '+') && t.size() > 1 && t[1] == ' ') {
    t = trim(t.substr(2));
    if (t.rfind("[ ] ", 0) == 0 || t.rfind("[x] ", 0) == 0 || t.rfind("[X] ", 0) == 0) t = t.substr(4);
    out += "- ";
  } else if (t.front() == '|') {
    bool separator = true;
    for (char x : t)
      if (x != '|' && x != '-' && x != ':' && x != ' ' && x != '\t') separator = false;
    if (separator) return;
    std::string_view row = t.substr(1);
    if (!row.empty() && row.back() == '|') row.remove_suffix(1);
    bool first = true;
    std::size_t start = 0;
    for (std::size_t k = 0; k <= row.size(); ++k) {
      if (k < row.size() && row[k] == '\\') {
        ++k;
        continue;
      }
      if (k == row.size() || row[k] == '|') {
        if (!first) out += '\t';
        markdown_inline(trim(row.substr(start, k - start)), out);
        first = false;
        start = k + 1;
      }
    }
    out += '\n';
    return;
  }
  markdown_inline(t, out);
  out += '\n';
}

}  // namespace loom::ingest
