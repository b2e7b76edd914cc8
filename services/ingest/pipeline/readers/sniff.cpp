#include "services/ingest/pipeline/readers/sniff.hpp"

#include <cstring>

namespace loom::ingest {
namespace {

std::string lower(std::string_view s) {
  std::string r(s);
  for (auto& c : r)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return r;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

std::string_view to_string(source_format f) {
  switch (f) {
    case source_format::text: return "text";
    case source_format::markdown: return "markdown";
    case source_format::html: return "html";
    case source_format::jsonl: return "jsonl";
    case source_format::csv: return "csv";
    case source_format::tsv: return "tsv";
    case source_format::archive: return "archive";
    case source_format::image: return "image";
    case source_format::audio: return "audio";
    case source_format::unknown: return "unknown";
  }
  return "unknown";
}

std::map<std::string, source_format, std::less<>> default_extensions() {
  return {
      {"txt", source_format::text},          {"text", source_format::text},
      {"md", source_format::markdown},       {"markdown", source_format::markdown},
      {"mdown", source_format::markdown},    {"mkd", source_format::markdown},
      {"html", source_format::html},         {"htm", source_format::html},
      {"xhtml", source_format::html},        {"jsonl", source_format::jsonl},
      {"ndjson", source_format::jsonl},      {"jsonlines", source_format::jsonl},
      {"csv", source_format::csv},           {"tsv", source_format::tsv},
      {"tab", source_format::tsv},           {"tar", source_format::archive},
      {"tgz", source_format::archive},       {"tzst", source_format::archive},
      {"tbz2", source_format::archive},      {"txz", source_format::archive},
      {"png", source_format::image},         {"jpg", source_format::image},
      {"jpeg", source_format::image},        {"webp", source_format::image},
      {"gif", source_format::image},         {"wav", source_format::audio},
      {"flac", source_format::audio},        {"ogg", source_format::audio},
      {"oga", source_format::audio},         {"mp3", source_format::audio},
  };
}

name_format format_for_name(std::string_view name, const reader_options& opt) {
  std::size_t slash = name.find_last_of("/!");
  std::string base = lower(slash == std::string_view::npos ? name : name.substr(slash + 1));
  const auto& ext = opt.extensions.empty() ? *[] {
    static const auto d = default_extensions();
    return &d;
  }() : opt.extensions;

  // Compressed tarballs: libarchive reads them whole.
  for (std::string_view s : {".tar.gz", ".tar.zst", ".tar.zstd", ".tar.bz2", ".tar.xz"})
    if (ends_with(base, s)) return {source_format::archive, compression::none};

  name_format nf;
  if (ends_with(base, ".gz")) {
    nf.comp = compression::gzip;
    base.resize(base.size() - 3);
  } else if (ends_with(base, ".zst")) {
    nf.comp = compression::zstd;
    base.resize(base.size() - 4);
  } else if (ends_with(base, ".zstd")) {
    nf.comp = compression::zstd;
    base.resize(base.size() - 5);
  }
  std::size_t dot = base.rfind('.');
  // No extension (README, x.gz) or a leading-dot-only name: plain text.
  if (dot == std::string::npos || dot == 0) {
    nf.format = source_format::text;
    return nf;
  }
  auto suffix = std::string_view(base).substr(dot + 1);
  auto it = ext.find(suffix);
  // A numeric "extension" is a version, not a format (Apache-2.0, notes.2024,
  // LGPL-2.1): plain text, as a name without one (binary content is still refused).
  const bool version_like =
      !suffix.empty() && suffix.find_first_not_of("0123456789") == std::string_view::npos;
  nf.format = it != ext.end() ? it->second : version_like ? source_format::text : source_format::unknown;
  if (nf.format == source_format::archive) nf.comp = compression::none;
  return nf;
}

std::optional<std::string> binary_reason(std::string_view head, double max_control_ratio) {
  if (const void* nul = std::memchr(head.data(), 0, head.size()))
    return "NUL byte at offset " + std::to_string(static_cast<const char*>(nul) - head.data());
  std::size_t control = 0;
  for (unsigned char c : head)
    if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != '\v' && c != 0x1b) || c == 0x7f)
      ++control;
  if (!head.empty() && static_cast<double>(control) > max_control_ratio * static_cast<double>(head.size()))
    return std::to_string(control) + " control bytes in the first " + std::to_string(head.size());
  return std::nullopt;
}

}  // namespace loom::ingest
