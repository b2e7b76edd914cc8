#include "libs/files/confine.hpp"

#include "libs/files/files.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <sys/stat.h>
#include <unistd.h>

namespace loom::files {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> real_path(const std::string& p) {
  char buf[PATH_MAX];
  if (!::realpath(p.c_str(), buf)) return std::nullopt;
  return std::string(buf);
}

// `path` made lexically normal, without a trailing '/' (except "/").
std::string normal(const std::string& path) {
  std::string s = fs::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::vector<std::string> canonical_roots(const std::vector<std::string>& roots) {
  std::vector<std::string> out;
  for (const auto& r : roots)
    if (!r.empty() && r.front() == '/')
      if (auto c = real_path(r)) out.push_back(*c);
  return out;
}

bool in_any(const std::vector<std::string>& canonical, const std::string& path) {
  for (const auto& r : canonical)
    if (within(r, path)) return true;
  return false;
}

// A failure inside the roots: not_found, else internal, never permission_denied
// (which callers read as "outside the roots").
error io_error(const std::string& what, const std::string& path, int e) {
  error err = errno_error(what, path, e);
  err.code = e == ENOENT || e == ENOTDIR ? errc::not_found : errc::internal;
  return err;
}

error outside(const std::string& path, const std::string& leads_to, const std::vector<std::string>& roots) {
  const std::string via = leads_to.empty() || leads_to == normal(path) ? "" : " (it leads to " + leads_to + ")";
  return make_error(errc::permission_denied,
                    path + via + " is outside the allowed roots " + describe_roots(roots));
}

}  // namespace

resolved_path resolve_path(const std::string& path) {
  if (auto r = real_path(path)) return {*r, true, 0};
  const int err = errno;
  fs::path p = normal(path), tail;
  while (p.has_relative_path()) {
    tail = tail.empty() ? p.filename() : p.filename() / tail;
    p = p.parent_path();
    if (auto r = real_path(p.string())) return {normal((fs::path(*r) / tail).string()), false, err};
  }
  return {normal("/" + tail.string()), false, err};
}

bool within(const std::string& root, const std::string& path) {
  if (root == "/") return !path.empty() && path.front() == '/';
  if (path.size() < root.size() || path.compare(0, root.size(), root) != 0) return false;
  return path.size() == root.size() || path[root.size()] == '/';
}

std::string describe_roots(const std::vector<std::string>& roots) {
  if (roots.empty()) return "(none configured)";
  std::string out = "(";
  for (std::size_t i = 0; i < roots.size(); ++i) out += (i ? ", " : "") + roots[i];
  return out + ")";
}

result<std::string> confined(const std::vector<std::string>& roots, const std::string& path) {
  if (path.empty() || path.front() != '/')
    return make_error(errc::invalid_argument, "path '" + path + "' is not absolute");
  const resolved_path r = resolve_path(path);
  if (!in_any(canonical_roots(roots), r.path)) return outside(path, r.exists ? r.path : "", roots);
  if (!r.exists) return io_error("resolve", path, r.err);
  return r.path;
}

result<std::string> root_set::confined(const std::string& path) {
  if (path.empty() || path.front() != '/')
    return make_error(errc::invalid_argument, "path '" + path + "' is not absolute");
  const resolved_path r = resolve_path(path);
  // Only an existing path inside a cached root is allowed from the cache: a
  // real path under a root's real path is under that directory now too.
  // Anything else is decided on the roots as they are now.
  if (!fresh_ || !r.exists || !in_any(canonical_, r.path)) {
    canonical_ = canonical_roots(roots_);
    fresh_ = true;
    if (!in_any(canonical_, r.path)) return outside(path, r.exists ? r.path : "", roots_);
  }
  if (!r.exists) return io_error("resolve", path, r.err);
  return r.path;
}

result<std::string> make_confined_dirs(const std::vector<std::string>& roots, const std::string& path,
                                       mode_t mode) {
  if (path.empty() || path.front() != '/') return confined(roots, path);  // its invalid_argument
  const std::string target = normal(path);  // lexically: "a/x/../b" is a/b
  std::vector<fs::path> missing;            // deepest first
  fs::path at = fs::path(target);
  std::error_code ec;
  while (!fs::exists(fs::symlink_status(at, ec)) && at != at.parent_path()) {
    missing.push_back(at);
    at = at.parent_path();
  }
  if (auto base = confined(roots, at.string()); !base) return base.err();
  for (auto it = missing.rbegin(); it != missing.rend(); ++it)
    if (::mkdir(it->c_str(), mode) != 0 && errno != EEXIST)
      return io_error("mkdir", it->string(), errno);
  return confined(roots, target);
}

result<int> open_confined(const std::vector<std::string>& roots, const std::string& path, int flags) {
  auto c = confined(roots, path);
  if (!c) return c.err();
  const int fd = ::open(c->c_str(), flags | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    if (errno == ELOOP)  // the last component became a link since confined() looked
      return make_error(errc::permission_denied, path + " changed into a symbolic link while it was opened");
    return io_error("open", path, errno);
  }
  // What was opened, by the kernel's own account: a directory on the way may
  // have been swapped for a link out after confined() resolved it.
  char buf[PATH_MAX];
  const std::string proc = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(proc.c_str(), buf, sizeof buf - 1);
  bool inside;
  std::string actual;
  if (n > 0) {
    actual.assign(buf, static_cast<std::size_t>(n));
    inside = in_any(canonical_roots(roots), actual);
  } else {  // no /proc: the file opened must be the one confined() resolved
    struct stat opened {}, named {};
    inside = ::fstat(fd, &opened) == 0 && ::stat(c->c_str(), &named) == 0 && opened.st_dev == named.st_dev &&
             opened.st_ino == named.st_ino;
  }
  if (!inside) {
    ::close(fd);
    return outside(path, actual, roots);
  }
  return fd;
}

}  // namespace loom::files
