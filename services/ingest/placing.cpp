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
  // Token shards and media tars alike: each file's new node's share, and what moved.
  auto tally = [&](const auto& was_files, const auto& now_files, auto share_count, std::uint64_t& moved) -> std::uint64_t {
    for (std::size_t i = 0; i < was_files.size(); ++i) {
      const auto& now = now_files[i];
      auto& share = p.nodes[at.at(now.node)];
      ++(share.*share_count);
      share.bytes += now.bytes;
      if (was_files[i].node != now.node) {
        ++moved;
        p.bytes_moved += now.bytes;
      }
    }
    return was_files.size();
  };
  p.shards = tally(current.shards, p.next.shards, &node_share::shards, p.shards_moved);
  p.media = tally(current.media, p.next.media, &node_share::media, p.media_moved);
  return p;
}

}  // namespace loom::ingest
