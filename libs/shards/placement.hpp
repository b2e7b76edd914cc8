// Shard placement: rendezvous (highest-random-weight) hashing of shard names onto
// node ids, with bounded loads. Every (node, shard) pair has a fixed 64-bit weight
// that depends on the two names only; a shard goes to the node of highest weight
// that still has room, where room is ceil(load_factor * shards / nodes) shards per
// node. Shards are taken in the order of a hash of their names, so the outcome is
// a function of the two name sets alone (input order does not matter).
//
// Why place a whole manifest after the writer finished instead of using
// shard_writer's per-shard `place` hook: the cap needs the number of shards, and
// the greedy fill needs them all to be order-independent. Ingest publishes a
// dataset only once, after the last shard, so nothing is lost by waiting.
//
// Movement when a node joins: shards whose top choice is the new node move to it
// (~1/(N+1) of them); the lower cap shifts a few more from full nodes to their
// next choice (placement.test.cpp measures the total). Weights of the other pairs
// never change, so without a cap (load_factor 0) exactly the new node's winners move.
//
// Stateless functions; safe from any thread.
#pragma once

#include "libs/shards/manifest.hpp"
#include "libs/status/status.hpp"

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace loom::shards {

struct placement_options {
  // Max shards per node = ceil(load_factor * mean). 1.05: within 5% of perfect
  // balance, still ~all shards on their first or second choice. <= 0: no cap
  // (plain rendezvous hashing: minimal movement, loads vary by ~1/sqrt(mean)).
  double load_factor = 1.05;
};

// The weight of `shard` on `node`: a 64-bit hash of both names (FNV-1a then the
// splitmix64 finaliser), fixed across machines and versions.
std::uint64_t placement_weight(std::string_view node, std::string_view shard);

// Max shards per node for `shards` shards on `nodes` nodes; REQUIRES nodes > 0.
std::size_t placement_cap(std::size_t shards, std::size_t nodes, const placement_options& opt = {});

// The node (an index into `nodes`) of each shard. invalid_argument when `nodes` is
// empty or holds an empty or repeated id.
result<std::vector<std::size_t>> place(std::span<const std::string> shards, std::span<const std::string> nodes,
                                       const placement_options& opt = {});

// Sets the node of every shard of `m` by place(): token shards and media tars
// each balanced on their own. Same errors.
status place_manifest(manifest& m, std::span<const std::string> nodes, const placement_options& opt = {});

}  // namespace loom::shards
