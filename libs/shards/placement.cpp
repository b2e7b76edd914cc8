#include "libs/shards/placement.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_set>

namespace loom::shards {
namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ull;
constexpr std::uint64_t fnv_prime = 0x100000001b3ull;

std::uint64_t fnv1a(std::uint64_t h, std::string_view s) {
  for (unsigned char c : s) {
    h ^= c;
    h *= fnv_prime;
  }
  return h;
}

// splitmix64's finaliser: FNV-1a alone mixes its last bytes poorly into the high bits.
std::uint64_t mix(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

// The order shards are filled in: a hash of the name alone (not of the node set),
// so one shard set is always filled in the same order.
std::uint64_t shard_rank(std::string_view shard) { return mix(fnv1a(fnv_offset ^ 0x5eed, shard)); }

status check_nodes(std::span<const std::string> nodes) {
  if (nodes.empty()) return make_error(errc::invalid_argument, "placement: no nodes");
  std::unordered_set<std::string_view> seen;
  for (const auto& n : nodes) {
    if (n.empty()) return make_error(errc::invalid_argument, "placement: empty node id");
    if (!seen.insert(n).second) return make_error(errc::invalid_argument, "placement: node " + n + " named twice");
  }
  return ok_status();
}

}  // namespace

std::uint64_t placement_weight(std::string_view node, std::string_view shard) {
  std::uint64_t h = fnv1a(fnv_offset, node);
  h = fnv1a(h ^ 0xff, "\x1f");  // a separator no id holds: ("ab","c") != ("a","bc")
  return mix(fnv1a(h, shard));
}

std::size_t placement_cap(std::size_t shards, std::size_t nodes, const placement_options& opt) {
  if (opt.load_factor <= 0) return shards;
  const double mean = static_cast<double>(shards) / static_cast<double>(nodes);
  // The epsilon keeps 1.05 * 20 (= 21.000000000000004 in binary) at 21.
  const auto cap = static_cast<std::size_t>(std::ceil(opt.load_factor * mean - 1e-9));
  // Never below ceil(mean): every shard must fit somewhere.
  return std::max<std::size_t>({cap, (shards + nodes - 1) / nodes, 1});
}

result<std::vector<std::size_t>> place(std::span<const std::string> shards, std::span<const std::string> nodes,
                                       const placement_options& opt) {
  if (auto st = check_nodes(nodes); !st) return st.err();
  const std::size_t cap = placement_cap(shards.size(), nodes.size(), opt);
  std::vector<std::size_t> order(shards.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::vector<std::uint64_t> rank(shards.size());
  for (std::size_t i = 0; i < shards.size(); ++i) rank[i] = shard_rank(shards[i]);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (rank[a] != rank[b]) return rank[a] < rank[b];
    if (shards[a] != shards[b]) return shards[a] < shards[b];
    return a < b;
  });
  std::vector<std::size_t> load(nodes.size(), 0), out(shards.size(), 0);
  for (std::size_t i : order) {
    std::size_t best = nodes.size();
    std::uint64_t best_w = 0;
    for (std::size_t n = 0; n < nodes.size(); ++n) {
      if (load[n] >= cap) continue;
      const std::uint64_t w = placement_weight(nodes[n], shards[i]);
      if (best == nodes.size() || w > best_w || (w == best_w && nodes[n] < nodes[best])) {
        best = n;
        best_w = w;
      }
    }
    // cap * nodes >= shards, so some node always has room.
    out[i] = best;
    ++load[best];
  }
  return out;
}

status place_manifest(manifest& m, std::span<const std::string> nodes, const placement_options& opt) {
  std::vector<std::string> names;
  names.reserve(m.shards.size());
  for (const auto& s : m.shards) names.push_back(s.name);
  auto where = place(names, nodes, opt);
  if (!where) return where.err();
  for (std::size_t i = 0; i < m.shards.size(); ++i) m.shards[i].node = nodes[(*where)[i]];
  // Media tars are balanced on their own: a text trainer reads only the token
  // shards, so mixing the two lists could leave a node with none of those.
  if (m.media.empty()) return ok_status();
  names.clear();
  for (const auto& s : m.media) names.push_back(s.name);
  auto media_where = place(names, nodes, opt);
  if (!media_where) return media_where.err();
  for (std::size_t i = 0; i < m.media.size(); ++i) m.media[i].node = nodes[(*media_where)[i]];
  return ok_status();
}

}  // namespace loom::shards
