#include "libs/cdc/manifest.hpp"

#include "libs/cdc/plain_file.hpp"

#include "libs/files/files.hpp"

#include "libs/crypto/encoding.hpp"
#include "libs/status/unix_time.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

using json = nlohmann::json;

constexpr std::string_view file_domain{"loom-cdc-file-v1\0", 17};
constexpr std::string_view dataset_domain{"loom-cdc-dataset-v1\0", 20};
constexpr std::string_view format_name = "loom-cdc-manifest";
constexpr int format_version = 1;
constexpr std::size_t max_path_bytes = 4096;
// No valid params allow a longer chunk (validate caps max_size): a peer's list
// with one is malformed, and must not make the reader allocate gigabytes.
constexpr std::uint32_t max_chunk_bytes = 64u << 20;
// A file whose mtime is this close to "now" may still be written within the
// same timestamp tick; its stamp is not cached (the "racy git" rule).
constexpr std::int64_t racy_window_ns = 2'000'000'000;
// Reads of a file that keeps changing underneath before giving up.
constexpr int max_read_attempts = 3;

void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::string hex(const crypto::digest& d) { return crypto::to_hex(crypto::as_view(d)); }

bool from_hex(const std::string& text, crypto::digest& out) {
  auto raw = crypto::from_hex(text);
  if (!raw.ok() || raw->size() != out.size()) return false;
  std::memcpy(out.data(), raw->data(), out.size());
  return true;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (std::size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 0x2) return false;
    if (n == 2 && c < 0xc2) return false;  // overlong
    i += n;
  }
  return true;
}

file_stamp stamp_of(const struct stat& st) {
  return {static_cast<std::uint64_t>(st.st_dev), static_cast<std::uint64_t>(st.st_ino),
          static_cast<std::uint64_t>(st.st_size), st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec,
          st.st_ctim.tv_sec * 1'000'000'000LL + st.st_ctim.tv_nsec};
}

// Chunks one file, re-reading it if it changed while being read.
result<file_entry> read_entry(const std::string& full, std::string rel, const params& p, const file_entry* cached,
                              std::int64_t started_ns, build_stats& stats) {
  for (int attempt = 0; attempt < max_read_attempts; ++attempt) {
    int fd = ::open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return files::errno_error("open", full);
    struct stat before {}, after {};
    if (::fstat(fd, &before) != 0) {
      auto e = files::errno_error("stat", full);
      ::close(fd);
      return e;
    }
    file_entry f;
    f.path = rel;
    f.stamp = stamp_of(before);
    if (cached && cached->stamp == f.stamp && cached->chunks.size() == cached->chunk_count) {
      ::close(fd);
      f = *cached;
      stats.files_reused++;
      return f;
    }
    ::close(fd);
    // The plaintext is what is chunked: a sealed file's bytes on disk differ
    // per site and per write (plain_file.hpp).
    auto pf = plain_file::open(full);
    if (!pf.ok()) return pf.err();
    result<std::vector<chunk>> chunks = std::vector<chunk>{};
    if (pf->sealed()) {
      chunks = chunk_data(pf->plaintext(), p);
    } else {
      ::posix_fadvise(pf->fd(), 0, 0, POSIX_FADV_SEQUENTIAL);
      chunks = chunk_fd(pf->fd(), full, p);
    }
    bool changed = ::fstat(pf->fd(), &after) != 0 || !(stamp_of(after) == f.stamp);
    if (!chunks.ok()) return chunks.err();
    stats.bytes_read += f.stamp.size;
    std::uint64_t total = 0;
    for (const auto& c : *chunks) total += c.length;
    if (changed || total != pf->size()) continue;
    f.size = total;
    f.chunks = std::move(*chunks);
    f.chunk_count = f.chunks.size();
    f.root = file_root(f.chunks);
    if (f.stamp.mtime_ns + racy_window_ns > started_ns)
      f.stamp = {};  // too fresh to trust next time
    stats.files_read++;
    return f;
  }
  return make_error(errc::conflict, full + " kept changing while it was read");
}

json chunk_json(const chunk& c) { return json::array({c.offset, c.length, hex(c.sha256)}); }

json entry_json(const file_entry& f, json_form form) {
  json j{{"path", f.path}, {"size", f.size}, {"root", hex(f.root)}, {"chunk_count", f.chunk_count}};
  if (form != json_form::summary) {
    json cs = json::array();
    for (const auto& c : f.chunks) cs.push_back(chunk_json(c));
    j["chunks"] = std::move(cs);
  }
  if (form == json_form::cache) {
    const auto& s = f.stamp;
    j["stamp"] = json::array({s.dev, s.ino, s.size, s.mtime_ns, s.ctime_ns});
  }
  return j;
}

// Parses one entry and checks it (check_file_entry); the message names what is wrong.
result<file_entry> entry_from(const json& j) {
  auto bad = [](std::string why) { return make_error(errc::corruption, std::move(why)); };
  if (!j.is_object()) return bad("file entry is not an object");
  file_entry f;
  f.path = j.at("path").get<std::string>();
  f.size = j.at("size").get<std::uint64_t>();
  f.chunk_count = j.at("chunk_count").get<std::uint64_t>();
  if (!from_hex(j.at("root").get<std::string>(), f.root)) return bad("bad root of " + f.path);
  if (auto it = j.find("stamp"); it != j.end()) {
    const json& s = *it;
    f.stamp = {s.at(0).get<std::uint64_t>(), s.at(1).get<std::uint64_t>(), s.at(2).get<std::uint64_t>(),
               s.at(3).get<std::int64_t>(), s.at(4).get<std::int64_t>()};
  }
  const auto it = j.find("chunks");
  if (it != j.end()) {
    f.chunks.reserve(it->size());
    for (const auto& c : *it) {
      chunk ch{c.at(0).get<std::uint64_t>(), c.at(1).get<std::uint32_t>(), {}};
      if (!from_hex(c.at(2).get<std::string>(), ch.sha256))
        return bad("chunk list of " + f.path + " is not contiguous, has a chunk over 64 MiB or a bad hash");
      f.chunks.push_back(ch);
    }
  }
  if (auto s = check_file_entry(f, it != j.end()); !s.ok()) return s.err();
  return f;
}

}  // namespace

const file_entry* manifest::find(std::string_view path) const {
  auto it = std::lower_bound(files.begin(), files.end(), path,
                             [](const file_entry& f, std::string_view p) { return f.path < p; });
  return it != files.end() && it->path == path ? &*it : nullptr;
}

std::uint64_t manifest::total_bytes() const {
  std::uint64_t n = 0;
  for (const auto& f : files) n += f.size;
  return n;
}

result<file_stamp> stamp_of_path(const std::string& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return files::errno_error("stat", path);
  return stamp_of(st);
}

crypto::digest file_root(const std::vector<chunk>& chunks) {
  std::string buf(file_domain);
  buf.reserve(buf.size() + chunks.size() * 40);
  for (const auto& c : chunks) {
    put_u64(buf, c.length);
    buf.append(crypto::as_view(c.sha256));
  }
  return crypto::sha256(buf);
}

crypto::digest dataset_root(const std::vector<file_entry>& files) {
  crypto::sha256_stream h;
  h.update(dataset_domain);
  std::string buf;
  for (const auto& f : files) {
    buf.clear();
    put_u64(buf, f.path.size());
    buf += f.path;
    put_u64(buf, f.size);
    buf.append(crypto::as_view(f.root));
    h.update(buf);
  }
  return h.finish();
}

status valid_relative_path(std::string_view path) {
  auto bad = [&](const char* why) {
    return make_error(errc::invalid_argument, "path \"" + std::string(path.substr(0, 128)) + "\": " + why);
  };
  if (path.empty()) return bad("empty");
  if (path.size() > max_path_bytes) return bad("longer than 4096 bytes");
  if (path.find('\0') != std::string_view::npos) return bad("contains NUL");
  if (path.front() == '/') return bad("absolute");
  std::size_t start = 0;
  bool first = true;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == "..") return bad("empty, \".\" or \"..\" segment");
    if (first && seg == sync_dir_name) return bad("inside the sync directory");
    first = false;
    start = end + 1;
  }
  return {};
}

status check_file_entry(const file_entry& f, bool with_chunks) {
  auto bad = [](std::string why) { return make_error(errc::corruption, std::move(why)); };
  if (auto s = valid_relative_path(f.path); !s.ok()) return bad(s.err().message);
  if (!with_chunks) return {};
  std::uint64_t off = 0;
  for (const auto& c : f.chunks) {
    if (c.offset != off || c.length == 0 || c.length > max_chunk_bytes)
      return bad("chunk list of " + f.path + " is not contiguous, has a chunk over 64 MiB or a bad hash");
    off += c.length;
  }
  if (off != f.size || f.chunks.size() != f.chunk_count)
    return bad("chunk list of " + f.path + " does not add up to its size");
  if (file_root(f.chunks) != f.root) return bad("root of " + f.path + " does not match its chunks");
  return {};
}

status check_manifest(const manifest& m, const std::string& origin) {
  auto bad = [&](const std::string& why) { return make_error(errc::corruption, origin + ": " + why); };
  if (auto s = validate(m.chunking); !s.ok()) return bad(s.err().message);
  for (std::size_t i = 0; i < m.files.size(); ++i) {
    const file_entry& f = m.files[i];
    if (auto s = check_file_entry(f, !f.chunks.empty()); !s.ok()) return bad(s.err().message);
    if (i > 0 && !(m.files[i - 1].path < f.path)) return bad("paths not sorted or repeated");
  }
  if (dataset_root(m.files) != m.root) return bad("dataset root does not match its files");
  return {};
}

result<manifest> build_manifest(const std::string& dir, const params& p, const manifest* previous,
                                build_stats* stats) {
  namespace fs = std::filesystem;
  if (auto s = validate(p); !s.ok()) return s.err();
  build_stats local;
  build_stats& st = stats ? *stats : local;
  const std::int64_t started = unix_now_ns();
  const bool reuse = previous && previous->chunking == p;

  std::vector<std::string> paths;
  std::error_code ec;
  fs::recursive_directory_iterator it(dir, fs::directory_options::none, ec), end;
  if (ec) return make_error(ec == std::errc::no_such_file_or_directory ? errc::not_found : errc::internal,
                            "list " + dir + ": " + ec.message());
  const std::string prefix = dir.ends_with('/') ? dir : dir + "/";
  for (; it != end; it.increment(ec)) {
    if (ec) return make_error(errc::internal, "list " + dir + ": " + ec.message());
    const fs::path& path = it->path();
    if (it.depth() == 0 && path.filename() == sync_dir_name) {
      it.disable_recursion_pending();
      continue;
    }
    auto type = it->symlink_status(ec).type();
    if (ec || type != fs::file_type::regular) continue;  // symlinks, sockets, dirs
    std::string rel = path.string().substr(prefix.size());
    if (!valid_utf8(rel)) return make_error(errc::invalid_argument, "file name is not UTF-8: " + path.string());
    if (auto s = valid_relative_path(rel); !s.ok()) return s.err();
    paths.push_back(std::move(rel));
  }
  std::sort(paths.begin(), paths.end());

  manifest m;
  m.chunking = p;
  m.files.reserve(paths.size());
  for (auto& rel : paths) {
    const file_entry* cached = reuse ? previous->find(rel) : nullptr;
    std::string full = prefix + rel;
    auto f = read_entry(full, std::move(rel), p, cached, started, st);
    if (!f.ok()) {
      if (f.code() == errc::not_found) continue;  // deleted since listed
      return f.err();
    }
    m.files.push_back(std::move(*f));
  }
  m.root = dataset_root(m.files);
  return m;
}

std::string to_json(const manifest& m, json_form form) {
  json files = json::array();
  for (const auto& f : m.files) files.push_back(entry_json(f, form));
  json j{{"format", format_name},
         {"version", format_version},
         {"chunking", {{"min", m.chunking.min_size}, {"avg", m.chunking.avg_size}, {"max", m.chunking.max_size}}},
         {"root", hex(m.root)},
         {"files", std::move(files)}};
  return j.dump();
}

result<manifest> parse_manifest(std::string_view text, const std::string& origin) {
  auto bad = [&](const std::string& why) { return make_error(errc::corruption, origin + ": " + why); };
  try {
    json j = json::parse(text);
    if (j.at("format").get<std::string>() != format_name || j.at("version").get<int>() != format_version)
      return bad("not a loom-cdc-manifest version 1");
    manifest m;
    const json& c = j.at("chunking");
    m.chunking = {c.at("min").get<std::uint32_t>(), c.at("avg").get<std::uint32_t>(), c.at("max").get<std::uint32_t>()};
    if (auto s = validate(m.chunking); !s.ok()) return bad(s.err().message);
    if (!from_hex(j.at("root").get<std::string>(), m.root)) return bad("bad root");
    for (const auto& fj : j.at("files")) {
      auto f = entry_from(fj);  // checked, chunk list and all
      if (!f.ok()) return bad(f.err().message);
      if (!m.files.empty() && !(m.files.back().path < f->path)) return bad("paths not sorted or repeated");
      m.files.push_back(std::move(*f));
    }
    if (dataset_root(m.files) != m.root) return bad("dataset root does not match its files");
    return m;
  } catch (const json::exception& e) {
    return bad(std::string("malformed: ") + e.what());
  }
}

std::vector<chunk> missing_chunks(const manifest& m, const chunk_set& have) {
  std::vector<chunk> out;
  chunk_set seen;
  for (const auto& f : m.files)
    for (const auto& c : f.chunks)
      if (!have.contains(c.sha256) && seen.insert(c.sha256).second) out.push_back(c);
  return out;
}

file_diff diff_files(const manifest& from, const manifest& to) {
  file_diff d;
  for (const auto& f : to.files) {
    const file_entry* old = from.find(f.path);
    if (!old || old->root != f.root || old->size != f.size) d.changed.push_back(f.path);
  }
  for (const auto& f : from.files)
    if (!to.find(f.path)) d.removed.push_back(f.path);
  return d;
}

}  // namespace loom::cdc
