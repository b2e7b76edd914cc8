#include "libs/cdc/received_shards.hpp"

#include "libs/atrest/object.hpp"
#include "libs/crypto/encoding.hpp"
#include "libs/crypto/hash.hpp"
#include "libs/files/files.hpp"
#include "libs/shards/check.hpp"
#include "libs/shards/manifest.hpp"
#include "libs/shards/reader.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

namespace loom::cdc {
namespace {

// Problems named in the refusal; the rest are counted.
constexpr std::size_t max_named = 8;

struct problems {
  std::vector<std::string> all;
  void add(const std::string& file, const std::string& what) { all.push_back(file + ": " + what); }
};

std::string says(const std::string& field, const std::string& manifest, const std::string& actual,
                 const char* whose = "the file's is ") {
  return field + ": manifest.json says " + manifest + ", " + whose + actual;
}

// `text` with every `from` replaced by `to` (a temp file's path by its name).
std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  if (from.empty()) return text;
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// The SHA-256 (hex) and size of the plaintext of `path` (unsealed, every tag
// verified, when it is sealed at rest); an error naming `name` when it cannot
// be read, unavailable when stopped.
struct plain_facts {
  std::string sha256;
  std::uint64_t bytes = 0;
};
result<plain_facts> hash_plaintext(const std::string& path, const std::string& name, const std::atomic<bool>* stop) {
  crypto::sha256_stream h;
  plain_facts out;
  auto st = atrest::read_object_stream(path, [&](std::string_view piece) -> status {
    if (stop && stop->load(std::memory_order_relaxed))
      return make_error(errc::unavailable, "check of the received dataset stopped");
    h.update(piece.data(), piece.size());
    out.bytes += piece.size();
    return {};
  });
  if (!st) {
    if (st.code() == errc::unavailable) return st.err();
    return make_error(errc::corruption, name + " cannot be read: " + replace_all(st.err().message, path, name));
  }
  out.sha256 = crypto::to_hex(crypto::as_view(h.finish()));
  return out;
}

// One listed shard against the file that came as it. Returns false only when stopped.
result<bool> check_shard(const shards::shard_info& s, const std::string& path, problems& out,
                         const std::atomic<bool>* stop, bool token_shard = true) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    out.add(s.name, "is listed in manifest.json but is not a regular file of the dataset");
    return true;
  }
  auto plain = hash_plaintext(path, s.name, stop);
  if (!plain) {
    if (plain.code() == errc::unavailable) return plain.err();
    out.add(s.name, plain.err().message);
    return true;
  }
  if (plain->bytes != s.bytes)
    out.add(s.name, says("bytes", std::to_string(s.bytes), std::to_string(plain->bytes), "the file has "));
  if (plain->sha256 != s.sha256) out.add(s.name, says("sha256", s.sha256, plain->sha256));
  if (!token_shard) return true;  // a media tar: its bytes and hash are all the manifest says
  auto r = shards::shard_reader::open(path);
  if (!r) {
    out.add(s.name, "is not a valid shard file: " + replace_all(r.err().message, path, s.name));
    return true;
  }
  if (r->token_count() != s.tokens)
    out.add(s.name, says("tokens", std::to_string(s.tokens), std::to_string(r->token_count()),
                         "the shard's header says "));
  if (r->doc_count() != s.docs)
    out.add(s.name, says("docs", std::to_string(s.docs), std::to_string(r->doc_count()), "the shard's header says "));
  if (r->type() != s.type)
    out.add(s.name, says("dtype", std::string(shards::to_string(s.type)), std::string(shards::to_string(r->type())),
                         "the shard's header says "));
  return true;
}

bool is_shard_file(const std::string& rel) {
  return rel.find('/') == std::string::npos && ((rel.starts_with("shard-") && rel.ends_with(".bin")) ||
                                                (rel.starts_with("media-") && rel.ends_with(".tar")));
}

}  // namespace

status check_received_shards(const staged_version& v, const std::string& dataset, const std::atomic<bool>* stop) {
  const std::string refused = "dataset " + dataset + ": ";
  const std::string manifest_name(shards::manifest_file_name);
  auto at = v.files.find(manifest_name);
  if (at == v.files.end()) return make_error(errc::corruption, refused + "no manifest.json came with it");
  auto text = files::read_file(at->second);
  if (!text) return make_error(errc::corruption, refused + "manifest.json cannot be read: " + text.err().message);
  auto m = shards::parse_manifest(*text, "manifest.json");
  if (!m) return make_error(errc::corruption, refused + m.err().message);

  problems out;
  std::set<std::string> listed;
  // Token shards first, then the media tars (checked by bytes and hash only).
  const std::size_t token_shards = m->shards.size();
  std::vector<shards::shard_info> all = m->shards;
  for (auto& f : shards::media_as_files(*m)) all.push_back(std::move(f));
  for (std::size_t i = 0; i < all.size(); ++i) {
    const auto& s = all[i];
    if (!listed.insert(s.name).second) {
      out.add(s.name, "is listed twice in manifest.json (its records would count twice)");
      continue;
    }
    auto file = v.files.find(s.name);
    if (file == v.files.end() && v.not_wanted.count(s.name)) continue;  // another node's share
    if (file == v.files.end()) {
      out.add(s.name, "is listed in manifest.json but did not come with it");
      continue;
    }
    auto checked = check_shard(s, file->second, out, stop, /*token_shard=*/i < token_shards);
    if (!checked) return checked.err();
  }
  for (const auto& [rel, path] : v.files)
    if (is_shard_file(rel) && !listed.count(rel)) out.add(rel, "came with the dataset but manifest.json does not list it");
  if (out.all.empty()) return {};

  std::string text_out;
  for (std::size_t i = 0; i < out.all.size() && i < max_named; ++i) text_out += (i ? "; " : "") + out.all[i];
  if (out.all.size() > max_named) text_out += "; and " + std::to_string(out.all.size() - max_named) + " more";
  return make_error(errc::corruption, refused + "manifest.json does not match the files received: " + text_out);
}

}  // namespace loom::cdc
