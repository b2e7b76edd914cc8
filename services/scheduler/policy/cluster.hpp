// Free capacity of every node, indexed for placement: each zone keeps its
// alive nodes in buckets by free GPUs, so a gang's feasibility is a sum over
// at most (GPUs per node + 1) buckets and best-fit walks the fullest nodes
// first. Owned by one policy instance; not thread-safe.
#pragma once

#include "libs/status/status.hpp"
#include "services/scheduler/policy/types.hpp"

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace loom::scheduler::policy {

class cluster {
 public:
  struct node_rec {
    node_id id = 0;
    std::uint32_t zone = 0;
    resources capacity;
    resources free;
    bool alive = false;
    bool cordoned = false;      // draining: keeps its members, takes no new ones
    std::uint32_t pos = 0;      // index inside its bucket (cordoned nodes are in none)
    bool placeable() const { return alive && !cordoned; }
    std::vector<job_id> jobs;   // jobs with members here (one entry per job)
  };
  struct zone_rec {
    std::string name;
    std::vector<std::vector<std::uint32_t>> buckets;  // [free gpus] -> node indices
    resources capacity;
    resources free;
  };

  // Zones exist from their first mention (a node or a job's constraint).
  std::uint32_t intern_zone(const std::string& name);
  std::optional<std::uint32_t> find_zone(const std::string& name) const;

  // Adds a node, or revives a removed one with a new capacity. Returns its index.
  result<std::uint32_t> add_node(const node_spec& n);
  // REQUIRES: the node holds no members (the policy releases them first).
  status remove_node(std::uint32_t idx);
  std::optional<std::uint32_t> index_of(node_id id) const;
  // Cordons (or releases) an alive node: out of the placement buckets, so best
  // fit and the GPU bound never see it; its members and capacity stay counted.
  void set_cordoned(std::uint32_t idx, bool on);

  // REQUIRES: r fits in the node's free capacity (take) / capacity (give).
  void take(std::uint32_t idx, const resources& r);
  void give(std::uint32_t idx, const resources& r);

  // Upper bound on members of `per` placeable in zone z: uses GPUs only.
  std::uint32_t gpu_bound(std::uint32_t z, const resources& per) const;
  // Best fit: picks up to `want` members on nodes of zone z, fewest free GPUs first,
  // a node hosting as many as `cap(idx)` allows. cap(idx) must not exceed the node's
  // free capacity. Appends one node index per member to `out`; returns the count.
  template <class Cap>
  std::uint32_t pick(std::uint32_t z, const resources& per, std::uint32_t want, Cap cap,
                     std::vector<std::uint32_t>& out) const;

  const node_rec& node(std::uint32_t idx) const { return nodes_[idx]; }
  node_rec& node(std::uint32_t idx) { return nodes_[idx]; }
  std::uint32_t size() const { return static_cast<std::uint32_t>(nodes_.size()); }
  const zone_rec& zone(std::uint32_t z) const { return zones_[z]; }
  std::uint32_t zone_count() const { return static_cast<std::uint32_t>(zones_.size()); }
  const std::vector<std::uint32_t>& zone_nodes(std::uint32_t z) const { return members_[z]; }
  const resources& capacity() const { return capacity_; }
  const resources& free() const { return free_; }

 private:
  void bucket_insert(std::uint32_t idx);
  void bucket_erase(std::uint32_t idx);

  std::vector<node_rec> nodes_;
  std::vector<zone_rec> zones_;
  std::vector<std::vector<std::uint32_t>> members_;  // zone -> node indices ever added
  std::map<std::string, std::uint32_t> zone_ids_;
  std::unordered_map<node_id, std::uint32_t> index_;
  resources capacity_;
  resources free_;
};

template <class Cap>
std::uint32_t cluster::pick(std::uint32_t z, const resources& per, std::uint32_t want, Cap cap,
                            std::vector<std::uint32_t>& out) const {
  std::uint32_t got = 0;
  const auto& b = zones_[z].buckets;
  for (std::size_t f = per.gpus; f < b.size() && got < want; ++f) {
    for (std::uint32_t idx : b[f]) {
      std::uint32_t k = members_fitting(cap(idx), per);
      for (; k > 0 && got < want; --k, ++got) out.push_back(idx);
      if (got == want) break;
    }
  }
  return got;
}

}  // namespace loom::scheduler::policy
