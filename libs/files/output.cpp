#include "libs/files/output.hpp"

#include "libs/files/confine.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <filesystem>

namespace loom::files {
namespace {

namespace fs = std::filesystem;

// `path` absolute and lexically normal, without a trailing '/' (except "/").
std::string absolute_normal(const std::string& path) {
  std::error_code ec;
  std::string s = fs::absolute(path, ec).lexically_normal().string();
  if (ec) s = fs::path(path).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

bool same_file(const struct stat& a, const struct stat& b) { return a.st_dev == b.st_dev && a.st_ino == b.st_ino; }

}  // namespace

std::vector<std::string> output_locations(const std::string& path) {
  const std::string abs = absolute_normal(path);
  const fs::path p(abs);
  if (!p.has_relative_path()) return {"/"};
  const std::string parent = resolve_path(p.parent_path().string()).path;
  const std::string named = parent == "/" ? "/" + p.filename().string() : parent + "/" + p.filename().string();
  std::vector<std::string> out{named};
  struct stat st {};
  if (::lstat(named.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return out;
  // A link: where it leads, existing or not (a dangling link would create its target).
  std::string leads = resolve_path(named).path;
  if (leads == named) {
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(named.c_str(), buf, sizeof buf - 1);
    if (n > 0) {
      const std::string target(buf, static_cast<std::size_t>(n));
      leads = resolve_path(target.front() == '/' ? target : parent + "/" + target).path;
    }
  }
  if (leads != named) out.push_back(leads);
  return out;
}

status check_output(const std::string& path, const output_rules& rules) {
  const std::string& opt = rules.option;
  if (path.empty()) return make_error(errc::invalid_argument, opt + " is empty");
  const auto where = output_locations(path);
  if (rules.refuse)
    for (const auto& loc : where)
      if (auto st = rules.refuse(loc); !st) return st;

  struct stat out {};
  const bool exists = ::stat(path.c_str(), &out) == 0;  // what writing it would replace (links followed)
  for (const auto& in : rules.inputs) {
    struct stat st {};
    if (in.empty() || ::stat(in.c_str(), &st) != 0) continue;
    if (exists && same_file(st, out))
      return make_error(errc::invalid_argument, opt + " " + path + " is the input " + in +
                                                    ": writing it would destroy what the command reads");
    if (!S_ISDIR(st.st_mode) || !exists) continue;
    const std::string dir = resolve_path(absolute_normal(in)).path;
    for (const auto& loc : where)
      if (within(dir, loc))
        return make_error(errc::invalid_argument, opt + " " + path + " is one of the files it reads (under the input " +
                                                      in + "): writing it would destroy what the command reads");
  }

  if (rules.kind == output_kind::directory) {
    if (exists && !S_ISDIR(out.st_mode))
      return make_error(errc::already_exists, opt + " " + path + " exists and is not a directory");
    return ok_status();
  }
  struct stat self {};
  if (::lstat(path.c_str(), &self) != 0) return ok_status();  // a new file
  if (exists && S_ISDIR(out.st_mode))
    return make_error(errc::already_exists, opt + " " + path + " is a directory; name the file to write");
  if (!rules.force)
    return make_error(errc::already_exists, opt + " " + path + " exists: pass --force to replace it");
  if (exists && !S_ISREG(out.st_mode))
    return make_error(errc::invalid_argument, opt + " " + path + " is not a regular file (a device or a pipe): "
                                                  "not replaced, even with --force");
  return ok_status();
}

}  // namespace loom::files
