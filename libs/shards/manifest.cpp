#include "libs/shards/manifest.hpp"

#include "libs/files/files.hpp"

#include <nlohmann/json.hpp>

#include <optional>

namespace loom::shards {
namespace {

using json = nlohmann::json;

error bad(const std::string& origin, const std::string& what) {
  return make_error(errc::corruption, origin + ": " + what);
}

// A shard name must stay inside the dataset directory.
bool plain_file_name(const std::string& n) {
  return !n.empty() && n != "." && n != ".." && n.find('/') == std::string::npos &&
         n.find('\0') == std::string::npos;
}

// A count (bytes, tokens, docs, version): a JSON integer >= 0, else nullopt.
// nlohmann's get<std::uint64_t>() converts whatever number it finds: -1 wraps
// to 2^64-1, 1.5 truncates to 1, and a float beyond 2^64 is undefined
// behaviour (found by tests/fuzz fuzz_manifest: "tokens": 3.3e34).
std::optional<std::uint64_t> count_field(const json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_unsigned()) return std::nullopt;
  return obj[key].get<std::uint64_t>();
}

}  // namespace

std::uint64_t manifest::total_tokens() const {
  std::uint64_t n = 0;
  for (const auto& s : shards) n += s.tokens;
  return n;
}

std::string to_json(const manifest& m) {
  json shards = json::array();
  for (const auto& s : m.shards) {
    shards.push_back({{"name", s.name},   {"sha256", s.sha256}, {"bytes", s.bytes},
                      {"tokens", s.tokens}, {"docs", s.docs},     {"dtype", to_string(s.type)},
                      {"node", s.node}});
  }
  json doc = {{"format", "loom-shards"}, {"version", format_version}, {"shards", shards}};
  if (!m.media.empty()) {
    json media = json::array();
    for (const auto& s : m.media)
      media.push_back({{"name", s.name},       {"sha256", s.sha256}, {"bytes", s.bytes},
                       {"records", s.records}, {"kind", s.kind},     {"node", s.node}});
    doc["media"] = std::move(media);
  }
  return doc.dump(2) + "\n";
}

result<manifest> parse_manifest(std::string_view text, const std::string& origin) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad(origin, "not valid JSON");
  try {
    if (!doc.is_object() || doc.value("format", "") != "loom-shards")
      return bad(origin, "format is not \"loom-shards\"");
    if (count_field(doc, "version") != format_version)
      return bad(origin, "unsupported version " + doc.value("version", json()).dump());
    if (!doc.contains("shards") || !doc["shards"].is_array()) return bad(origin, "no shards array");
    manifest m;
    for (const auto& j : doc["shards"]) {
      shard_info s;
      s.name = j.at("name").get<std::string>();
      if (!plain_file_name(s.name)) return bad(origin, "shard name \"" + s.name + "\" is not a plain file name");
      s.sha256 = j.at("sha256").get<std::string>();
      if (s.sha256.size() != 64) return bad(origin, s.name + ": sha256 is not 64 hex digits");
      const auto bytes = count_field(j, "bytes"), tokens = count_field(j, "tokens"), docs = count_field(j, "docs");
      if (!bytes || !tokens || !docs)
        return bad(origin, s.name + ": bytes, tokens and docs must be integers from 0 to 2^64-1");
      s.bytes = *bytes;
      s.tokens = *tokens;
      s.docs = *docs;
      auto t = dtype_from_string(j.at("dtype").get<std::string>());
      if (!t) return bad(origin, s.name + ": unknown dtype " + j.at("dtype").dump());
      s.type = *t;
      s.node = j.value("node", "");
      m.shards.push_back(std::move(s));
    }
    if (doc.contains("media")) {
      if (!doc["media"].is_array()) return bad(origin, "media is not an array");
      for (const auto& j : doc["media"]) {
        media_shard_info s;
        s.name = j.at("name").get<std::string>();
        if (!plain_file_name(s.name)) return bad(origin, "media shard name \"" + s.name + "\" is not a plain file name");
        s.sha256 = j.at("sha256").get<std::string>();
        if (s.sha256.size() != 64) return bad(origin, s.name + ": sha256 is not 64 hex digits");
        const auto bytes = count_field(j, "bytes"), records = count_field(j, "records");
        if (!bytes || !records) return bad(origin, s.name + ": bytes and records must be integers from 0 to 2^64-1");
        s.bytes = *bytes;
        s.records = *records;
        s.kind = j.at("kind").get<std::string>();
        if (s.kind != "image" && s.kind != "audio" && s.kind != "mixed")
          return bad(origin, s.name + ": unknown media kind \"" + s.kind + "\"");
        s.node = j.value("node", "");
        m.media.push_back(std::move(s));
      }
    }
    return m;
  } catch (const json::exception& e) {
    return bad(origin, std::string("malformed: ") + e.what());
  }
}

result<manifest> read_manifest(const std::string& dir) {
  const std::string path = dir + "/" + std::string(manifest_file_name);
  auto text = files::read_file(path);
  if (!text) return text.err();
  return parse_manifest(*text, path);
}

status write_manifest(const std::string& dir, const manifest& m) {
  return files::write_atomic(dir + "/" + std::string(manifest_file_name), to_json(m));
}

}  // namespace loom::shards
