#include "libs/runspec/input_files.hpp"

#include "libs/files/files.hpp"
#include "libs/model/memory.hpp"
#include "libs/runspec/schema.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace loom::runspec {
namespace {

std::string type_of(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

result<const file_rule*> rule_for(std::string_view key) {
  const key_spec* spec = find_key(key);
  if (!spec || spec->kind != value_kind::path)
    return make_error(errc::internal, std::string(key) + " is not a path key of the run spec (schema.cpp)");
  return &rule_of(spec->file);
}

// The kind of file and its size against the key's rule.
status check_stat(const std::string& key, const std::string& path, const struct stat& st, const file_rule& rule) {
  const bool dir = S_ISDIR(st.st_mode), reg = S_ISREG(st.st_mode);
  if (rule.directory != dir || (!rule.directory && !reg))
    return make_error(errc::invalid_argument, key + " " + path + " is " + type_of(st.st_mode) + ", not " +
                                                  (rule.directory ? "a directory" : "a regular file") + ": " + key +
                                                  " names " + std::string(rule.what));
  const auto size = static_cast<std::uint64_t>(st.st_size);
  if (!rule.directory && size > rule.max_bytes)
    return make_error(errc::invalid_argument, key + " " + path + " is " + model::format_bytes(size) + ", over the " +
                                                  describe_cap(rule.max_bytes) + " allowed for " +
                                                  std::string(rule.what) + ": " + std::string(rule.why));
  return ok_status();
}

}  // namespace

std::string describe_cap(std::uint64_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0) return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

status check_input(files::root_set& roots, std::string_view key_view, const std::string& path) {
  const std::string key(key_view);
  auto rule = rule_for(key);
  if (!rule) return rule.err();
  auto inside = roots.confined(path);
  if (!inside) return make_error(inside.code(), key + ": " + inside.err().message);
  struct stat st {};
  if (::stat(inside->c_str(), &st) != 0) {
    const int err = errno;
    error e = files::errno_error("stat", path, err);
    if (err == ENOENT || err == ENOTDIR) e.code = errc::not_found;
    if (e.code == errc::permission_denied) e.code = errc::internal;  // permission_denied: outside the roots only
    return make_error(e.code, key + ": " + e.message);
  }
  return check_stat(key, path, st, **rule);
}

status check_inputs(files::root_set& roots, const std::vector<std::pair<std::string, std::string>>& paths,
                    const std::string& where) {
  for (const auto& [key, path] : paths) {
    if (path.empty()) continue;
    auto st = check_input(roots, key, path);
    if (st) continue;
    std::string why = where + st.err().message;
    if (st.code() == errc::permission_denied)
      why += "; a stage reads only under the import roots (`loom up --import-root DIR`, after `loom down`) "
             "and the deployment's job outputs";
    return make_error(st.code(), why);
  }
  return ok_status();
}

result<std::string> read_input(std::string_view key_view, const std::string& path) {
  const std::string key(key_view);
  auto rule = rule_for(key);
  if (!rule) return rule.err();
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    error e = files::errno_error("open", path, err);
    if (err == ENOENT || err == ENOTDIR) e.code = errc::not_found;
    return make_error(e.code, key + ": " + e.message);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    error e = files::errno_error("fstat", path);
    ::close(fd);
    return make_error(e.code, key + ": " + e.message);
  }
  if (auto ok = check_stat(key, path, st, **rule); !ok || (*rule)->directory) {
    ::close(fd);
    if (!ok) return ok.err();
    return make_error(errc::internal, key + " names a directory: read_input reads files");
  }
  const std::uint64_t cap = (*rule)->max_bytes;
  std::string out;
  out.resize(static_cast<std::size_t>(st.st_size) + 1);  // one byte more: a file that grew is seen
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (have > cap) break;
      out.resize(std::min<std::uint64_t>(cap + 1, have * 2 + 4096));
    }
    const ssize_t n = ::read(fd, out.data() + have, out.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      error e = files::errno_error("read", path);
      ::close(fd);
      return make_error(e.code, key + ": " + e.message);
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  ::close(fd);
  if (have > cap)
    return make_error(errc::invalid_argument, key + " " + path + " grew over the " + describe_cap(cap) +
                                                  " allowed for " + std::string((*rule)->what) + " while it was read: " +
                                                  std::string((*rule)->why));
  out.resize(have);
  return out;
}

}  // namespace loom::runspec
