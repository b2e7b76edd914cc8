// `--set` values (toml_reader.hpp): the text of one override turned into
// exactly one TOML value, or refused — a line break would smuggle a second
// key into the document ("train.steps=5\nrogue=1" was read as 5).
#include "libs/runspec/toml_reader.hpp"

#include <cstdio>
#include <cstring>

namespace loom::runspec {
namespace {

// Offset of the first byte of `text` that does not start a well-formed UTF-8
// sequence (Unicode 15 table 3-7: no overlongs, surrogates or code points
// above U+10FFFF), or text.size(). A TOML document is UTF-8: a bare word that
// is not would be written into the stage's config as a string the trainer's
// parser then refuses (found by tests/fuzz fuzz_template: "dataset=\xe9").
std::size_t first_bad_utf8(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    std::size_t n = 0;
    unsigned char lo = 0x80, hi = 0xbf;  // allowed range of the second byte
    if (c < 0x80) n = 1;
    else if (c >= 0xc2 && c <= 0xdf) n = 2;
    else if (c >= 0xe0 && c <= 0xef) n = 3, lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;
    else return i;
    if (text.size() - i < n) return i;
    for (std::size_t k = 1; k < n; ++k) {
      const unsigned char b = static_cast<unsigned char>(text[i + k]);
      if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xbf)) return i;
    }
    i += n;
  }
  return text.size();
}

}  // namespace

std::string quoted_text(std::string_view text, std::size_t max) {
  std::string out = "\"";
  for (std::size_t i = 0; i < text.size() && i < max; ++i) {
    const unsigned char ch = static_cast<unsigned char>(text[i]);
    if (ch == '\n') out += "\\n";
    else if (ch == '\r') out += "\\r";
    else if (ch == '\t') out += "\\t";
    else if (ch == '"' || ch == '\\') out += std::string("\\") + char(ch);
    else if (ch < 0x20 || ch == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", ch);
      out += buf;
    } else {
      out += char(ch);
    }
  }
  out += "\"";
  if (text.size() > max) out += "... (" + std::to_string(text.size()) + " characters)";
  return out;
}

result<std::unique_ptr<toml::node>> override_value(const std::string& text) {
  for (unsigned char ch : text)
    if ((ch < 0x20 && ch != '\t') || ch == 0x7f)
      return make_error(errc::invalid_argument, quoted_text(text) + " is not one TOML value: it holds a control character "
                                                               "(a value is one line; write escapes inside a quoted "
                                                               "string)");
  // The message never repeats the bad bytes: it travels in a protobuf string.
  if (const auto bad = first_bad_utf8(text); bad < text.size()) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned char>(text[bad]));
    return make_error(errc::invalid_argument, "the value is not valid UTF-8: byte " + std::to_string(bad + 1) + " is " +
                                                  hex + " (a run spec is a TOML document, which is UTF-8)");
  }
  // A TOML value starts with a quote, bracket, sign, digit or the t/f/i/n of
  // true, false, inf and nan: anything else (a path, a name) is a plain string,
  // known without a parse that would throw.
  const auto first = text.find_first_not_of(" \t");
  if (first == std::string::npos || !std::strchr("\"'[{+-0123456789tfin", text[first]))
    return std::unique_ptr<toml::node>(std::make_unique<toml::value<std::string>>(text));
  // Text that opens a string, an array or a table must be exactly that
  // value: "'a' rogue" is no bare word.
  const bool opens_value = std::strchr("\"'[{", text[first]) != nullptr;
  try {
    const std::string doc = "v = " + text;
    toml::table t = toml::parse(std::string_view(doc), std::string_view("--set"));
    toml::node* v = t.get("v");
    if (t.size() != 1 || !v)
      return make_error(errc::invalid_argument, quoted_text(text) + " is not one TOML value");
    if (auto* s = v->as_string()) return std::unique_ptr<toml::node>(std::make_unique<toml::value<std::string>>(s->get()));
    if (auto* i = v->as_integer()) return std::unique_ptr<toml::node>(std::make_unique<toml::value<std::int64_t>>(i->get()));
    if (auto* f = v->as_floating_point()) return std::unique_ptr<toml::node>(std::make_unique<toml::value<double>>(f->get()));
    if (auto* b = v->as_boolean()) return std::unique_ptr<toml::node>(std::make_unique<toml::value<bool>>(b->get()));
    if (auto* a = v->as_array()) return std::unique_ptr<toml::node>(std::make_unique<toml::array>(*a));
    if (auto* tb = v->as_table()) return std::unique_ptr<toml::node>(std::make_unique<toml::table>(*tb));
    return make_error(errc::invalid_argument, quoted_text(text) + " is not a value a run spec key takes");
  } catch (const toml::parse_error& e) {
    if (opens_value)
      return make_error(errc::invalid_argument,
                        quoted_text(text) + " is not one TOML value (" + std::string(e.description()) + ")");
  }
  return std::unique_ptr<toml::node>(std::make_unique<toml::value<std::string>>(text));  // a bare word: "news", "5abc"
}

}  // namespace loom::runspec
