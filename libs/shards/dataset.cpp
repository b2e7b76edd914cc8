#include "libs/shards/dataset.hpp"

#include <algorithm>
#include <set>

namespace loom::shards {

result<dataset> dataset::open(const std::string& dir, verify mode) {
  auto m = read_manifest(dir);
  if (!m) return m.err();
  return from(dir, std::move(*m), mode);
}

result<dataset> dataset::open_placed(const std::string& dir, const std::string& node, verify mode) {
  auto m = read_manifest(dir);
  if (!m) return m.err();
  std::set<std::string> nodes;
  for (const auto& s : m->shards) nodes.insert(s.node.empty() ? "(unplaced)" : s.node);
  std::erase_if(m->shards, [&](const shard_info& s) { return s.node != node; });
  if (m->shards.empty()) {
    std::string list;
    for (const auto& n : nodes) list += (list.empty() ? "" : ", ") + n;
    return make_error(errc::invalid_argument, dir + ": no shard is placed on node " + node +
                                                  " (its shards are placed on: " + (list.empty() ? "none" : list) + ")");
  }
  return from(dir, std::move(*m), mode);
}

result<dataset> dataset::from(std::string dir, manifest m, verify mode) {
  dataset d;
  d.dir_ = std::move(dir);
  d.manifest_ = std::move(m);
  for (const auto& s : d.manifest_.shards) {
    d.starts_.push_back(d.total_);
    d.total_ += s.tokens;
  }
  d.open_.resize(d.manifest_.shards.size());
  if (mode == verify::eager) {
    for (std::size_t i = 0; i < d.open_.size(); ++i) {
      if (auto r = d.shard(i); !r) return r.err();
    }
  }
  return d;
}

result<const shard_reader*> dataset::shard(std::size_t i) {
  if (open_[i]) return &*open_[i];
  const shard_info& s = manifest_.shards[i];
  auto r = shard_reader::open(dir_ + "/" + s.name, s.sha256);
  if (!r) return r.err();
  auto bad = [&](const std::string& what) {
    return make_error(errc::corruption, r->path() + ": " + what);
  };
  if (r->token_count() != s.tokens)
    return bad("has " + std::to_string(r->token_count()) + " tokens but manifest says " +
               std::to_string(s.tokens));
  if (r->doc_count() != s.docs)
    return bad("has " + std::to_string(r->doc_count()) + " documents but manifest says " +
               std::to_string(s.docs));
  if (r->type() != s.type)
    return bad("dtype " + std::string(to_string(r->type())) + " but manifest says " +
               std::string(to_string(s.type)));
  open_[i] = std::move(*r);
  return &*open_[i];
}

status dataset::read(std::uint64_t first, std::span<std::uint32_t> out) {
  if (first > total_ || out.size() > total_ - first)
    return make_error(errc::invalid_argument,
                      dir_ + ": tokens [" + std::to_string(first) + ", +" +
                          std::to_string(out.size()) + ") past the end of " +
                          std::to_string(total_) + " tokens");
  // Last shard starting at or before `first` (skips empty shards sharing that start).
  std::size_t i = static_cast<std::size_t>(
      std::upper_bound(starts_.begin(), starts_.end(), first) - starts_.begin() - 1);
  std::size_t done = 0;
  while (done < out.size()) {
    auto r = shard(i);
    if (!r) return r.err();
    const std::uint64_t local = first + done - starts_[i];
    const std::uint64_t n = std::min<std::uint64_t>(out.size() - done, (*r)->token_count() - local);
    auto got = (*r)->tokens(local, n, out.subspan(done, n));
    if (!got) return got.err();
    done += n;
    ++i;
  }
  return ok_status();
}

}  // namespace loom::shards
