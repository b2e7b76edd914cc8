#include "services/ingest/placing.hpp"

#include "libs/shards/placement.hpp"

#include <map>

namespace loom::ingest {

result<placement_plan> replan(const shards::manifest& current, const std::vector<std::string>& nodes,
                              double load_factor) {
  placement_plan p;
  p.next = current;
  const double lf = load_factor > 0 ? load_factor : 1.05;
  if (auto st = shards::place_manifest(p.next, nodes, {.load_factor = lf}); !st) return st.err();
  std::map<std::string, std::size_t> at;
  for (const auto& n : nodes) {
    at.emplace(n, p.nodes.size());
    p.nodes.push_back({n, 0, 0, 0});
  }
  p.shards = current.shards.size();
  for (std::size_t i = 0; i < current.shards.size(); ++i) {
    const auto& was = current.shards[i];
    const auto& now = p.next.shards[i];
    auto& share = p.nodes[at.at(now.node)];
    ++share.shards;
    share.bytes += now.bytes;
    if (was.node != now.node) {
      ++p.shards_moved;
      p.bytes_moved += now.bytes;
    }
  }
  p.media = current.media.size();
  for (std::size_t i = 0; i < current.media.size(); ++i) {
    const auto& was = current.media[i];
    const auto& now = p.next.media[i];
    auto& share = p.nodes[at.at(now.node)];
    ++share.media;
    share.bytes += now.bytes;
    if (was.node != now.node) {
      ++p.media_moved;
      p.bytes_moved += now.bytes;
    }
  }
  return p;
}

}  // namespace loom::ingest
