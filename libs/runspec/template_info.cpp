#include "libs/runspec/template_info.hpp"
#include "libs/runspec/toml_reader.hpp"

#include <algorithm>
#include <cctype>
#include <map>

namespace loom::runspec {
namespace {

// The profiles of services/ingest/pipeline/filters/profile.hpp (ingest checks again).
const std::vector<std::string> profiles = {"default", "web", "code", "minimal"};

// services/ingest/pipeline/readers/sniff.cpp's default_extensions(), by format name.
const std::map<std::string, std::string, std::less<>> extensions = {
    {"txt", "text"},      {"text", "text"},      {"md", "markdown"},     {"markdown", "markdown"},
    {"mdown", "markdown"}, {"mkd", "markdown"},   {"html", "html"},       {"htm", "html"},
    {"xhtml", "html"},    {"jsonl", "jsonl"},    {"ndjson", "jsonl"},    {"jsonlines", "jsonl"},
    {"csv", "csv"},       {"tsv", "tsv"},        {"tab", "tsv"},         {"tar", "archive"},
    {"tgz", "archive"},   {"tzst", "archive"},   {"tbz2", "archive"},    {"txz", "archive"}};

error bad_at(std::string_view tmpl, const toml::node& at, const std::string& why) {
  return make_error(errc::invalid_argument, "template " + std::string(tmpl) + ": " + std::string(tmpl) + ".toml:" +
                                                std::to_string(at.source().begin.line) + ": " + why);
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

result<std::vector<std::string>> strings_of(std::string_view tmpl, const toml::node& v, const std::string& key,
                                            const std::vector<std::string>* allowed) {
  const toml::array* a = v.as_array();
  if (!a) return bad_at(tmpl, v, "ingest." + key + " must be an array of strings");
  std::vector<std::string> out;
  for (auto&& e : *a) {
    auto s = e.value<std::string>();
    if (!e.is_string() || !s || s->empty()) return bad_at(tmpl, e, "ingest." + key + " must hold non-empty strings");
    if (allowed && std::find(allowed->begin(), allowed->end(), *s) == allowed->end())
      return bad_at(tmpl, e, "ingest." + key + ": \"" + *s + "\" is not one of " + joined(*allowed));
    out.push_back(*s);
  }
  return out;
}

}  // namespace

std::vector<std::string> template_header(std::string_view toml) {
  std::vector<std::string> lines;
  std::size_t at = 0;
  while (at < toml.size() && toml[at] == '#') {
    std::size_t end = toml.find('\n', at);
    if (end == std::string_view::npos) end = toml.size();
    std::string_view line = toml.substr(at + 1, end - at - 1);
    if (!line.empty() && line.front() == ' ') line.remove_prefix(1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    at = end + 1;
  }
  return lines;
}

std::string template_summary(std::string_view toml) {
  auto h = template_header(toml);
  return h.empty() ? std::string() : h.front();
}

const std::vector<std::string>& ingest_format_names() {
  static const std::vector<std::string> names = {"text", "markdown", "html", "jsonl", "csv", "tsv", "archive"};
  return names;
}

std::string ingest_format_of(std::string_view name) {
  if (auto slash = name.rfind('/'); slash != std::string_view::npos) name.remove_prefix(slash + 1);
  std::string base(name);
  std::transform(base.begin(), base.end(), base.begin(), [](unsigned char c) { return std::tolower(c); });
  for (std::string_view s : {".tar.gz", ".tar.zst", ".tar.zstd", ".tar.bz2", ".tar.xz"})
    if (base.ends_with(s)) return "archive";
  for (std::string_view s : {".gz", ".zst", ".zstd"})
    if (base.ends_with(s)) {
      base.resize(base.size() - s.size());
      break;
    }
  const std::size_t dot = base.rfind('.');
  if (dot == std::string::npos || dot == 0) return "text";
  const std::string suffix = base.substr(dot + 1);
  if (auto it = extensions.find(suffix); it != extensions.end()) return it->second;
  if (!suffix.empty() && suffix.find_first_not_of("0123456789") == std::string::npos) return "text";
  return "";
}

result<ingest_settings> read_ingest_section(std::string_view tmpl, std::string_view text) {
  toml::table root;
  try {
    root = toml::parse(text, std::string_view(tmpl));
  } catch (const toml::parse_error& e) {
    return make_error(errc::invalid_argument, "template " + std::string(tmpl) + ": line " +
                                                  std::to_string(e.source().begin.line) + ": " +
                                                  std::string(e.description()));
  }
  const toml::node* node = root.get("ingest");
  if (!node) return ingest_settings{};
  return read_ingest_table(tmpl, *node);
}

result<ingest_settings> read_ingest_table(std::string_view tmpl, const toml::node& section) {
  ingest_settings s;
  const toml::node* node = &section;
  const toml::table* t = node->as_table();
  if (!t) return bad_at(tmpl, *node, "[ingest] must be a table");
  s.present = true;
  for (auto&& [k, v] : *t) {
    const std::string key(k.str());
    if (key == "profile") {
      auto p = v.value<std::string>();
      if (!v.is_string() || std::find(profiles.begin(), profiles.end(), *p) == profiles.end())
        return bad_at(tmpl, v, "ingest.profile must be one of " + joined(profiles));
      s.profile = *p;
    } else if (key == "deny_licences") {
      auto l = strings_of(tmpl, v, key, nullptr);
      if (!l) return l.err();
      s.deny_licences = std::move(*l);
    } else if (key == "pii" || key == "dedup") {
      if (!v.is_boolean()) return bad_at(tmpl, v, "ingest." + key + " must be true or false");
      (key == "pii" ? s.pii : s.dedup) = *v.value<bool>();
    } else if (key == "text_field") {
      auto f = v.value<std::string>();
      if (!v.is_string() || f->empty()) return bad_at(tmpl, v, "ingest.text_field must be a non-empty string");
      s.text_field = *f;
    } else if (key == "formats") {
      auto l = strings_of(tmpl, v, key, &ingest_format_names());
      if (!l) return l.err();
      s.formats = std::move(*l);
    } else {
      return bad_at(tmpl, v, "ingest." + key +
                                 " is not a known key (profile, deny_licences, pii, dedup, text_field, formats)");
    }
  }
  return s;
}

}  // namespace loom::runspec
