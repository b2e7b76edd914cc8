#include "libs/cdc/rebuild.hpp"
#include "libs/status/unix_time.hpp"

#include "libs/atrest/sealed.hpp"
#include "libs/files/files.hpp"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::cdc {
namespace {

// mkdir -p of dir/rel, refusing to pass through a symlink: a link planted in
// the receiving directory must not redirect a published file elsewhere.
status real_dirs(const std::string& dir, const std::string& rel) {
  std::string cur = dir;
  std::size_t start = 0;
  while (start < rel.size()) {
    std::size_t end = rel.find('/', start);
    if (end == std::string::npos) end = rel.size();
    cur += "/" + rel.substr(start, end - start);
    start = end + 1;
    struct stat st {};
    if (::lstat(cur.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) continue;
      return make_error(errc::permission_denied, cur + " is not a directory (a symlink?); refusing to write below it");
    }
    if (::mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST) return files::errno_error("mkdir", cur);
  }
  return {};
}

std::string parent_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

}  // namespace

rebuilder::rebuilder(std::string dir, chunk_store& store, const manifest& local, seal_policy seal)
    : dir_(std::move(dir)), tmp_dir_(dir_ + "/" + std::string(sync_dir_name) + "/tmp"), store_(store),
      seal_(std::move(seal)) {
  for (const auto& f : local.files)
    for (const auto& c : f.chunks) local_.try_emplace(c.sha256, location{f.path, c.offset, c.length});
}

rebuilder::~rebuilder() {
  for (auto& [tmp, rel] : built_) ::unlink(tmp.c_str());
}

bool rebuilder::have(const crypto::digest& id) const { return store_.contains(id) || local_.contains(id); }

// The chunk's bytes from the first copy that hashes right; copies that do not are forgotten.
result<std::string> rebuilder::read_chunk(const chunk& c) {
  if (store_.contains(c.sha256)) {
    auto r = store_.get(c.sha256);  // verifies; forgets copies that fail
    if (r.ok()) {
      counters_.from_store++;
      return r;
    }
    counters_.bad_copies++;
  }
  if (auto it = local_.find(c.sha256); it != local_.end()) {
    const location loc = it->second;
    auto src = sources_.get(dir_ + "/" + loc.path);
    std::string buf(loc.length, '\0');
    const bool read = src.ok() && (*src)->read(loc.offset, buf.data(), buf.size()).ok();
    if (read && crypto::sha256(buf) == c.sha256) {
      counters_.from_local++;
      return buf;
    }
    local_.erase(it);
    counters_.bad_copies++;
  }
  return make_error(errc::corruption, "no verified copy of a chunk at offset " + std::to_string(c.offset));
}

status rebuilder::build(const file_entry& f) {
  if (auto s = files::make_dirs(tmp_dir_); !s.ok()) return s;
  std::string tmp = tmp_dir_ + "/" + std::to_string(next_tmp_++);
  // A sealed file is written by a sealed_writer, which publishes it at `tmp`
  // itself (its own temporary, fsync, rename) on finish.
  std::unique_ptr<atrest::sealed_writer> sealed;
  int fd = -1;
  if (seal_.seals(f.path)) {
    auto w = atrest::sealed_writer::create(tmp, *seal_.keys, loom::wall_now(), 0644);
    if (!w.ok()) return w.err();
    sealed = std::move(*w);
  } else {
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0) return files::errno_error("create", tmp);
  }
  std::vector<chunk> written;  // verified chunks as written, for the root check
  written.reserve(f.chunks.size());
  status st;
  for (const auto& c : f.chunks) {
    auto bytes = read_chunk(c);
    if (!bytes.ok()) {
      st = make_error(bytes.code(), f.path + ": " + bytes.err().message);
      break;
    }
    if (st = sealed ? sealed->append(*bytes) : files::write_all(fd, *bytes, tmp); !st.ok()) break;
    written.push_back(c);  // read_chunk verified the bytes against c.sha256
  }
  if (st.ok() && (file_root(written) != f.root || written.size() != f.chunks.size()))
    st = make_error(errc::corruption, f.path + ": rebuilt file does not match its root");
  if (sealed) {
    if (st.ok())
      if (auto done = sealed->finish(); !done.ok()) st = done.err();
    sealed.reset();  // unfinished: removes its temporary
  } else if (::close(fd) != 0 && st.ok()) {
    st = files::errno_error("close", tmp);
  }
  if (!st.ok()) {
    ::unlink(tmp.c_str());
    return st;
  }
  built_.emplace_back(tmp, f.path);
  return {};
}

status rebuilder::publish(const std::vector<std::string>& removed) {
  sources_.clear();
  if (!built_.empty()) {
    // One syncfs instead of an fsync per file: a dataset may have 10^5 small files.
    int dfd = ::open(tmp_dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return files::errno_error("open", tmp_dir_);
    int rc = ::syncfs(dfd);
    auto e = rc != 0 ? files::errno_error("syncfs", tmp_dir_) : error{};
    ::close(dfd);
    if (rc != 0) return e;
  }
  std::set<std::string> dirs;
  if (!removed.empty()) dirs.insert(dir_);
  for (const auto& rel : removed) {
    std::string path = dir_ + "/" + rel;
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) return files::errno_error("remove", path);
    // Drop directories the removal left empty (rmdir fails harmlessly on the rest).
    for (std::string d = parent_of(rel); d != "."; d = parent_of(d))
      if (::rmdir((dir_ + "/" + d).c_str()) != 0) break;
    dirs.insert(parent_of(path));
  }
  for (auto it = built_.begin(); it != built_.end(); it = built_.erase(it)) {
    const std::string target = dir_ + "/" + it->second;
    const std::string parent = parent_of(target);
    if (auto rel_parent = parent_of(it->second); rel_parent != ".")
      if (auto s = real_dirs(dir_, rel_parent); !s.ok()) return s;
    struct stat st {};
    if (::lstat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      return make_error(errc::conflict, target + " is a directory; the dataset has a file there");
    if (::rename(it->first.c_str(), target.c_str()) != 0) return files::errno_error("rename to", target);
    dirs.insert(parent);
  }
  for (const auto& d : dirs) {
    struct stat st {};
    if (::stat(d.c_str(), &st) != 0) continue;  // removed as empty
    if (auto s = files::fsync_dir(d); !s.ok()) return s;
  }
  return {};
}

}  // namespace loom::cdc
