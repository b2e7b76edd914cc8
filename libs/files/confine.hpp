// Confinement of reads to allowed roots: the ingest service opens import
// sources, and the trainer its data.text / data.sft files, only under roots
// the operator configured. A path lies inside a root when its canonical form
// (every symbolic link resolved, as realpath) is the root's canonical form or
// lies under it on a component boundary (/srv/in is not inside /srv/i). A
// symbolic link that stays inside a root is fine; one that leads out is not.
// Stateless functions; thread-safe.
//
//   confined(roots, p)        decide on a name: permission_denied / not_found / the canonical path
//   open_confined(roots, p)   decide, open, then check what was opened (closes the race
//                             between the check and the open: see below)
//   make_confined_dirs(roots, p)  mkdir -p that creates nothing outside the roots
#pragma once

#include "libs/status/status.hpp"

#include <string>
#include <sys/types.h>
#include <vector>

namespace loom::files {

// The canonical form of `path` when it lies inside one of `roots`.
// Errors, in this order:
//   invalid_argument  `path` is not absolute;
//   permission_denied `path` lies in no root, whether it exists or not (no
//                     existence oracle outside the roots): "<path> is outside
//                     the allowed roots (<root>, <root>)" — when `path` is a
//                     link out, the message names where it leads;
//   not_found         it lies inside a root but does not exist;
//   internal          it lies inside a root but cannot be resolved (EACCES on
//                     a directory on the way, a loop of links), errno named.
// permission_denied means "outside the roots" and nothing else, so callers
// can tell a refusal from a file they may not read.
// Roots are canonicalised on every call; a root that does not exist (or is
// not absolute) contains nothing. Empty `roots`: every path is refused.
result<std::string> confined(const std::vector<std::string>& roots, const std::string& path);

// confined(), then open(2)s the canonical path with `flags` | O_CLOEXEC |
// O_NOFOLLOW, then checks what was opened: the kernel's name for the open
// file (/proc/self/fd/N) must lie inside a root too (without /proc: the
// opened file must be the one the check saw, same device and inode). So a
// component swapped for a link out between the check and the open is caught:
// permission_denied, and the descriptor is closed. For existing files and
// directories (REQUIRES: no O_CREAT). Returns the descriptor, owned by the caller.
// Errors: those of confined(); a failed open(2) is not_found (ENOENT) or
// internal naming the errno (EACCES included: still not permission_denied).
result<int> open_confined(const std::vector<std::string>& roots, const std::string& path, int flags);

// mkdir -p for a directory that must lie inside one of `roots`: `path` is
// taken lexically normal ("a/x/../b" is a/b); the deepest part of it that exists (a dangling link counts) must be confined(), and
// only the missing parts below it are made (with `mode`), so nothing is
// created through a link that leads out. Returns confined(roots, path): the
// canonical directory. Errors: those of confined() (permission_denied for
// anything outside, or leading out, with nothing made); a failed mkdir(2) is
// not_found (ENOENT, ENOTDIR) or internal, naming the directory and the errno.
result<std::string> make_confined_dirs(const std::vector<std::string>& roots, const std::string& path,
                                       mode_t mode = 0755);

// Where absolute `path` leads: its realpath when it resolves (exists = true);
// otherwise the realpath of its longest resolvable prefix with the rest
// appended lexically (a name that does not exist, or lies behind a directory
// that may not be searched, is judged by where it would be); `err` keeps
// realpath's errno then.
struct resolved_path {
  std::string path;
  bool exists = false;
  int err = 0;
};
resolved_path resolve_path(const std::string& path);

// True when canonical path `path` is `root` or lies under it on a component
// boundary. Both must already be canonical (no links, no "..", no trailing '/'
// except for "/" itself).
bool within(const std::string& root, const std::string& path);

// confined() for a fixed list of roots asked many times (the scheduler checks
// every submitted stage's paths): the roots' canonical forms are computed once
// and again before any answer but "allowed", so a root created, moved or
// removed since is seen and a refusal is never stale. (An existing real path
// under a root's real path is under it still; only a root that is itself a
// link, re-pointed since, keeps its old target until the next refresh.) The
// path itself is resolved on every call.
// Not thread-safe: one owner (an actor) calls it.
class root_set {
 public:
  root_set() = default;
  explicit root_set(std::vector<std::string> roots) : roots_(std::move(roots)) {}
  // Same answers and errors as confined(roots(), path).
  result<std::string> confined(const std::string& path);
  const std::vector<std::string>& roots() const { return roots_; }
  bool empty() const { return roots_.empty(); }

 private:
  std::vector<std::string> roots_;
  std::vector<std::string> canonical_;
  bool fresh_ = false;  // canonical_ computed since construction
};

// "(a, b)" for messages; "(none configured)" when empty.
std::string describe_roots(const std::vector<std::string>& roots);

}  // namespace loom::files
