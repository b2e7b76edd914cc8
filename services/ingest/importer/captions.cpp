#include "services/ingest/importer/captions.hpp"

#include "services/ingest/pipeline/readers/byte_source.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>

namespace loom::ingest {
namespace fs = std::filesystem;
namespace {

std::string lower_ext(const fs::path& p) {
  std::string e = p.extension().string();
  if (!e.empty()) e.erase(0, 1);
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return e;
}

// The file at `path`, at most `cap` bytes, opened inside the roots. nullopt-like
// error when it is longer (resource_exhausted) or cannot be read.
result<std::string> read_small(const std::string& path, const std::vector<std::string>& roots, std::uint64_t cap) {
  auto src = open_file_source(path, roots);
  if (!src) return src.err();
  std::string out;
  char buf[16 * 1024];
  for (;;) {
    auto n = (*src)->read(buf, sizeof buf);
    if (!n) return n.err();
    if (*n == 0) return out;
    if (out.size() + *n > cap)
      return make_error(errc::resource_exhausted, "over " + std::to_string(cap) + " bytes");
    out.append(buf, *n);
  }
}

// "caption", "text" or "transcript" of a JSON object: the first that is a string.
std::optional<std::string> caption_field(const nlohmann::json& j) {
  for (const char* k : {"caption", "text", "transcript"})
    if (auto it = j.find(k); it != j.end() && it->is_string()) return it->get<std::string>();
  return std::nullopt;
}

class walker {
 public:
  walker(const caption_options& opt, caption_index& out) : opt_(opt), out_(out) {}

  void dir(const fs::path& d, int depth) {
    if (depth > 64) return;  // the reader walks no deeper than the file system lets it; a bound all the same
    std::error_code ec;
    std::vector<fs::path> entries;
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string n = it->path().filename().string();
      if (opt_.skip_hidden && !n.empty() && n[0] == '.') continue;
      entries.push_back(it->path());
    }
    std::sort(entries.begin(), entries.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
    std::set<std::string> names;
    for (const auto& e : entries) names.insert(e.filename().string());
    for (const auto& e : entries) {
      auto st = fs::symlink_status(e, ec);
      if (ec) continue;
      if (fs::is_directory(st)) {
        dir(e, depth + 1);
        continue;
      }
      if (is_media_name(e.filename().string())) sidecar_of(e, names);
      else if (lower_ext(e) == "jsonl") maybe_manifest(e);
    }
  }

 private:
  bool room_for(std::uint64_t n) {
    if (held_ + n > opt_.max_total_bytes) return false;
    held_ += n;
    return true;
  }

  void sidecar_of(const fs::path& media, const std::set<std::string>& names) {
    const std::string stem = media.stem().string(), full = media.filename().string();
    for (const std::string& cand : {stem + ".txt", stem + ".json", full + ".txt"}) {
      if (!names.count(cand) || is_media_name(cand)) continue;
      const fs::path side = media.parent_path() / cand;
      out_.claimed.insert(side.string());
      if (out_.by_media.count(media_key(media.string()))) continue;  // the first sidecar wins; the rest are claimed too
      auto text = read_small(side.string(), opt_.roots, opt_.max_caption_bytes);
      if (!text) {
        out_.problems.push_back({side.string(), 0,
                                 text.code() == errc::resource_exhausted ? "caption_too_long" : "caption_unreadable",
                                 text.err().message + "; " + full + " is imported without a caption"});
        continue;
      }
      std::string cap = std::move(*text);
      if (cand.ends_with(".json")) {
        auto j = nlohmann::json::parse(cap, nullptr, false);
        auto f = j.is_object() ? caption_field(j) : std::nullopt;
        if (!f) {
          out_.problems.push_back({side.string(), 0, "caption_sidecar_bad_json",
                                   "not a JSON object with a string caption, text or transcript field"});
          continue;
        }
        cap = std::move(*f);
      }
      if (!room_for(cap.size())) {
        out_.problems.push_back({side.string(), 0, "caption_over_budget", "captions held reached the budget"});
        continue;
      }
      ++out_.sidecars;
      out_.by_media[media_key(media.string())] = {std::move(cap), side.string()};
    }
  }

  void maybe_manifest(const fs::path& p) {
    auto src = open_file_source(p.string(), opt_.roots);
    if (!src) return;  // the text reader will name it
    // Only the first line decides; read it, bounded.
    std::string head;
    char buf[4096];
    while (head.find('\n') == std::string::npos && head.size() <= opt_.max_caption_bytes) {
      auto n = (*src)->read(buf, sizeof buf);
      if (!n || *n == 0) break;
      head.append(buf, *n);
    }
    head.resize(std::min(head.find('\n'), head.size()));
    auto j = nlohmann::json::parse(head, nullptr, false);
    if (!j.is_object() || !((j.contains("image") && j["image"].is_string()) || (j.contains("audio") && j["audio"].is_string())))
      return;
    out_.claimed.insert(p.string());
    auto whole = read_small(p.string(), opt_.roots, opt_.max_total_bytes);
    if (!whole) {
      out_.problems.push_back({p.string(), 0, "caption_manifest_unreadable", whole.err().message});
      return;
    }
    std::uint64_t line = 0;
    std::size_t at = 0;
    while (at < whole->size()) {
      std::size_t nl = whole->find('\n', at);
      if (nl == std::string::npos) nl = whole->size();
      const std::string_view l(whole->data() + at, nl - at);
      at = nl + 1;
      ++line;
      if (l.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      auto r = nlohmann::json::parse(l, nullptr, false);
      const char* key = r.is_object() && r.contains("image") ? "image" : "audio";
      auto cap = r.is_object() ? caption_field(r) : std::nullopt;
      if (!r.is_object() || !r.contains(key) || !r[key].is_string() || !cap) {
        out_.problems.push_back({p.string(), line, "caption_manifest_bad_line",
                                 "want {\"image\" or \"audio\": path, \"caption\"/\"text\"/\"transcript\": string}"});
        continue;
      }
      const fs::path target = (p.parent_path() / r[key].get<std::string>()).lexically_normal();
      std::error_code ec;
      if (!fs::exists(target, ec)) {
        out_.problems.push_back({p.string(), line, "caption_target_missing", target.string() + " does not exist"});
        continue;
      }
      if (cap->size() > opt_.max_caption_bytes) {
        out_.problems.push_back({p.string(), line, "caption_too_long",
                                 std::to_string(cap->size()) + " bytes; " + target.string() + " stays uncaptioned"});
        continue;
      }
      if (!room_for(cap->size())) {
        out_.problems.push_back({p.string(), line, "caption_over_budget", "captions held reached the budget"});
        continue;
      }
      ++out_.manifest_lines;
      // A manifest's caption wins over a sidecar: it was written for the purpose.
      out_.by_media[media_key(target.string())] = {std::move(*cap), p.filename().string() + " line " + std::to_string(line)};
    }
  }

  const caption_options& opt_;
  caption_index& out_;
  std::uint64_t held_ = 0;
};

}  // namespace

bool is_media_name(const std::string& name) {
  static const std::set<std::string> exts = {"png", "jpg", "jpeg", "webp", "gif", "wav", "flac", "ogg", "oga", "mp3"};
  return exts.count(lower_ext(fs::path(name))) > 0;
}

std::string media_key(const std::string& media_path) { return fs::path(media_path).lexically_normal().string(); }

result<caption_index> find_captions(const std::string& source, const caption_options& opt) {
  caption_index out;
  std::error_code ec;
  if (!fs::is_directory(fs::status(source, ec))) return out;
  walker w(opt, out);
  w.dir(fs::path(source), 0);
  return out;
}

}  // namespace loom::ingest
