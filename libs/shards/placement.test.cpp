// Rendezvous placement with bounded loads: balance, movement when a node joins,
// determinism.
#include "libs/shards/format.hpp"
#include "libs/shards/placement.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

using namespace loom;
using namespace loom::shards;

namespace {

std::vector<std::string> shard_names(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 1; i <= n; ++i) out.push_back(shard_file_name(i));
  return out;
}

std::vector<std::string> node_names(std::size_t n) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < n; ++i) out.push_back("edge-" + std::to_string(i));
  return out;
}

std::vector<std::size_t> loads(const std::vector<std::size_t>& where, std::size_t nodes) {
  std::vector<std::size_t> l(nodes, 0);
  for (auto n : where) ++l[n];
  return l;
}

}  // namespace

TEST_CASE("bounded rendezvous keeps every node within 5% of the mean load") {
  for (std::size_t nodes : {2, 3, 7, 16}) {
    for (std::size_t per_node : {20, 40, 100}) {
      const auto shards = shard_names(nodes * per_node);
      auto where = place(shards, node_names(nodes));
      REQUIRE(where.ok());
      const auto l = loads(*where, nodes);
      const double mean = static_cast<double>(shards.size()) / static_cast<double>(nodes);
      const double ratio = static_cast<double>(*std::max_element(l.begin(), l.end())) / mean;
      MESSAGE("N=" << nodes << " shards=" << shards.size() << " max/mean=" << ratio
                   << " min/mean=" << static_cast<double>(*std::min_element(l.begin(), l.end())) / mean);
      CHECK(ratio <= 1.05 + 1e-12);
      CHECK(*std::max_element(l.begin(), l.end()) <= placement_cap(shards.size(), nodes));
    }
  }
}

TEST_CASE("without a cap plain rendezvous is unbalanced, which is why the cap exists") {
  const auto shards = shard_names(16 * 20);
  auto where = place(shards, node_names(16), {.load_factor = 0});
  REQUIRE(where.ok());
  const auto l = loads(*where, 16);
  const double ratio = static_cast<double>(*std::max_element(l.begin(), l.end())) / 20.0;
  MESSAGE("uncapped N=16 max/mean=" << ratio);
  CHECK(ratio > 1.05);
}

TEST_CASE("a node joining moves about 1/(N+1) of the shards, a bounded few more for the cap") {
  for (std::size_t nodes : {2, 3, 7, 16}) {
    const auto shards = shard_names(nodes * 40);
    auto before = place(shards, node_names(nodes));
    auto after = place(shards, node_names(nodes + 1));  // same ids plus one
    REQUIRE(before.ok());
    REQUIRE(after.ok());
    std::size_t moved = 0, to_new = 0;
    for (std::size_t i = 0; i < shards.size(); ++i) {
      moved += (*before)[i] != (*after)[i];
      to_new += (*after)[i] == nodes;
    }
    const double ideal = static_cast<double>(shards.size()) / static_cast<double>(nodes + 1);
    MESSAGE("N=" << nodes << "->" << nodes + 1 << " shards=" << shards.size() << " moved=" << moved
                 << " (ideal " << ideal << ", to the new node " << to_new << ")");
    CHECK(static_cast<double>(to_new) >= ideal * 0.5);  // the new node takes a real share
    CHECK(static_cast<double>(moved) <= 1.5 * ideal);    // deterministic: fixed names

    // Uncapped: exactly the shards whose winner is now the new node move.
    auto u_before = place(shards, node_names(nodes), {.load_factor = 0});
    auto u_after = place(shards, node_names(nodes + 1), {.load_factor = 0});
    for (std::size_t i = 0; i < shards.size(); ++i)
      if ((*u_before)[i] != (*u_after)[i]) CHECK((*u_after)[i] == nodes);
  }
}

TEST_CASE("the same names give the same placement in any input order") {
  const auto shards = shard_names(200);
  const auto nodes = node_names(7);
  auto a = place(shards, nodes);
  auto b = place(shards, nodes);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a == *b);
  std::vector<std::string> reversed(shards.rbegin(), shards.rend());
  auto c = place(reversed, nodes);
  REQUIRE(c.ok());
  for (std::size_t i = 0; i < shards.size(); ++i) CHECK((*c)[shards.size() - 1 - i] == (*a)[i]);
  CHECK(placement_weight("edge-1", "shard-000001.bin") == placement_weight("edge-1", "shard-000001.bin"));
  CHECK(placement_weight("ab", "c") != placement_weight("a", "bc"));
}

TEST_CASE("a manifest is placed in place and bad node lists are refused") {
  manifest m;
  for (const auto& n : shard_names(10)) {
    shard_info s;
    s.name = n;
    m.shards.push_back(s);
  }
  REQUIRE(place_manifest(m, std::vector<std::string>{"a", "b"}).ok());
  std::size_t on_a = 0;
  for (const auto& s : m.shards) {
    CHECK((s.node == "a" || s.node == "b"));
    on_a += s.node == "a";
  }
  CHECK(on_a >= 4);  // cap = ceil(1.05 * 5) = 6 per node
  CHECK(on_a <= 6);
  CHECK(place_manifest(m, std::vector<std::string>{}).code() == errc::invalid_argument);
  CHECK(place_manifest(m, std::vector<std::string>{"a", "a"}).code() == errc::invalid_argument);
  CHECK(place_manifest(m, std::vector<std::string>{"a", ""}).code() == errc::invalid_argument);
  manifest one;
  one.shards.emplace_back().name = "shard-000001.bin";
  REQUIRE(place_manifest(one, std::vector<std::string>{"local"}).ok());
  CHECK(one.shards[0].node == "local");
}
