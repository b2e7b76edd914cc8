#include "services/ingest/pipeline/readers/json_flat.hpp"

#include "services/ingest/pipeline/utf8.hpp"

namespace loom::ingest::detail {
namespace {

class scanner {
 public:
  explicit scanner(std::string_view s) : s_(s) {}
  void ws() {
    while (i_ < s_.size() && (s_[i_] == ' ' || s_[i_] == '\t' || s_[i_] == '\r' || s_[i_] == '\n')) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  bool at_end() const { return i_ == s_.size(); }
  char peek() const { return i_ < s_.size() ? s_[i_] : '\0'; }

  // A key without escapes; the opening quote is next.
  bool raw_string(std::string_view& out) {
    if (!eat('"')) return false;
    std::size_t start = i_;
    while (i_ < s_.size() && s_[i_] != '"') {
      auto c = static_cast<unsigned char>(s_[i_]);
      if (c == '\\' || c < 0x20) return false;
      ++i_;
    }
    if (i_ == s_.size()) return false;
    out = s_.substr(start, i_ - start);
    ++i_;
    return true;
  }

  bool string(std::string& out) {
    if (!eat('"')) return false;
    out.clear();
    for (;;) {
      std::size_t start = i_;
      while (i_ < s_.size()) {
        auto c = static_cast<unsigned char>(s_[i_]);
        if (c == '"' || c == '\\' || c < 0x20) break;
        ++i_;
      }
      out.append(s_.substr(start, i_ - start));
      if (i_ == s_.size() || static_cast<unsigned char>(s_[i_]) < 0x20) return false;
      if (s_[i_++] == '"') return true;
      if (i_ == s_.size()) return false;
      switch (s_[i_++]) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          char32_t cp;
          if (!hex4(cp)) return false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            char32_t lo;
            if (!eat('\\') || !eat('u') || !hex4(lo) || lo < 0xDC00 || lo > 0xDFFF) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return false;
          }
          utf8::append(out, cp);
          break;
        }
        default: return false;
      }
    }
  }

  // -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  bool number(std::string& out) {
    std::size_t start = i_;
    eat('-');
    if (eat('0')) {
    } else if (digits() == 0) {
      return false;
    }
    if (eat('.') && digits() == 0) return false;
    if (eat('e') || eat('E')) {
      if (!eat('+')) eat('-');
      if (digits() == 0) return false;
    }
    out.assign(s_.substr(start, i_ - start));
    return true;
  }

  bool literal(std::string_view word, std::string& out) {
    if (s_.substr(i_, word.size()) != word) return false;
    i_ += word.size();
    out.assign(word);
    return true;
  }

 private:
  std::size_t digits() {
    std::size_t n = 0;
    while (i_ < s_.size() && s_[i_] >= '0' && s_[i_] <= '9') ++i_, ++n;
    return n;
  }
  bool hex4(char32_t& cp) {
    if (i_ + 4 > s_.size()) return false;
    cp = 0;
    for (int k = 0; k < 4; ++k) {
      char c = s_[i_++];
      int d;
      if (c >= '0' && c <= '9') d = c - '0';
      else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
      else return false;
      cp = cp * 16 + static_cast<char32_t>(d);
    }
    return true;
  }

  std::string_view s_;
  std::size_t i_ = 0;
};

}  // namespace

bool parse_flat_object(std::string_view line, std::vector<flat_field>& out) {
  out.clear();
  scanner sc(line);
  sc.ws();
  if (!sc.eat('{')) return false;
  sc.ws();
  if (!sc.eat('}')) {
    for (;;) {
      flat_field f;
      sc.ws();
      if (!sc.raw_string(f.key)) return false;
      sc.ws();
      if (!sc.eat(':')) return false;
      sc.ws();
      const char c = sc.peek();
      bool ok;
      if (c == '"') {
        f.t = flat_field::type::string;
        ok = sc.string(f.value);
      } else if (c == 't' || c == 'f') {
        f.t = flat_field::type::boolean;
        ok = sc.literal(c == 't' ? "true" : "false", f.value);
      } else if (c == 'n') {
        f.t = flat_field::type::null;
        ok = sc.literal("null", f.value);
      } else {
        f.t = flat_field::type::number;
        ok = sc.number(f.value);
      }
      if (!ok) return false;
      out.push_back(std::move(f));
      sc.ws();
      if (sc.eat('}')) break;
      if (!sc.eat(',')) return false;
    }
  }
  sc.ws();
  return sc.at_end();
}

std::string_view type_name(flat_field::type t) {
  switch (t) {
    case flat_field::type::string: return "string";
    case flat_field::type::number: return "number";
    case flat_field::type::boolean: return "boolean";
    case flat_field::type::null: return "null";
  }
  return "null";
}

}  // namespace loom::ingest::detail
