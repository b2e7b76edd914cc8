#include "libs/runtime/scheduler_targets.hpp"

#include <sys/stat.h>

namespace loom::runtime {
namespace {

std::timespec mtime_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return st.st_mtim;
}

bool same(const std::timespec& a, const std::timespec& b) { return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec; }

}  // namespace

scheduler_targets::scheduler_targets(layout::paths paths, std::vector<std::string> initial)
    : paths_(std::move(paths)), targets_(std::move(initial)) {
  seen_eps_ = mtime_of(paths_.endpoints());
  seen_peers_ = mtime_of(paths_.peers());
}

bool scheduler_targets::refresh() {
  const auto eps = mtime_of(paths_.endpoints());
  const auto peers = mtime_of(paths_.peers());
  if (same(eps, seen_eps_) && same(peers, seen_peers_)) return false;
  auto e = layout::read_endpoints(paths_.endpoints());
  if (!e) return false;  // mid-write elsewhere or damaged: asked again at the next change
  seen_eps_ = eps;
  seen_peers_ = peers;
  auto now = e->rpc_targets("scheduler");
  if (now.empty() || now == targets_) return false;
  targets_ = std::move(now);
  return true;
}

std::string describe_targets(const std::vector<std::string>& targets) {
  std::string out;
  for (const auto& t : targets) out += (out.empty() ? "" : ", ") + t;
  return out;
}

}  // namespace loom::runtime
