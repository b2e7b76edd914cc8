// `--set` values (toml_reader.hpp): the text of one override turned into
// exactly one TOML value, or refused — a line break would smuggle a second
// key into the document ("train.steps=5\nrogue=1" was read as 5).
#include "libs/runspec/toml_reader.hpp"

#include <cstdio>
#include <cstring>

namespace loom::runspec {

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
