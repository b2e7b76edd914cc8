#include "services/scheduler/policy/cluster.hpp"

#include <algorithm>

namespace loom::scheduler::policy {

resources operator+(const resources& a, const resources& b) {
  return {a.gpus + b.gpus, a.cpu_cores + b.cpu_cores, a.memory_bytes + b.memory_bytes};
}
resources operator-(const resources& a, const resources& b) {
  return {a.gpus - b.gpus, a.cpu_cores - b.cpu_cores, a.memory_bytes - b.memory_bytes};
}
resources operator*(const resources& a, std::uint32_t k) {
  return {a.gpus * k, a.cpu_cores * k, a.memory_bytes * k};
}
bool fits_in(const resources& need, const resources& have) {
  return need.gpus <= have.gpus && need.cpu_cores <= have.cpu_cores &&
         need.memory_bytes <= have.memory_bytes;
}
resources min_of(const resources& a, const resources& b) {
  return {std::min(a.gpus, b.gpus), std::min(a.cpu_cores, b.cpu_cores),
          std::min(a.memory_bytes, b.memory_bytes)};
}
std::uint32_t members_fitting(const resources& have, const resources& per) {
  std::uint64_t k = std::numeric_limits<std::uint32_t>::max();
  if (per.gpus) k = std::min<std::uint64_t>(k, have.gpus / per.gpus);
  if (per.cpu_cores) k = std::min<std::uint64_t>(k, have.cpu_cores / per.cpu_cores);
  if (per.memory_bytes) k = std::min<std::uint64_t>(k, have.memory_bytes / per.memory_bytes);
  return static_cast<std::uint32_t>(k);
}

const char* to_string(action a) {
  switch (a) {
    case action::place: return "place";
    case action::preempt: return "preempt";
    case action::shrink: return "shrink";
    case action::grow: return "grow";
    case action::requeue: return "requeue";
  }
  return "unknown";
}
const char* to_string(reason r) {
  switch (r) {
    case reason::fits: return "fits";
    case reason::backfill: return "backfill";
    case reason::reclaim: return "reclaim";
    case reason::higher_priority: return "higher_priority";
    case reason::pressure: return "pressure";
    case reason::node_lost: return "node_lost";
    case reason::idle_capacity: return "idle_capacity";
  }
  return "unknown";
}

std::uint32_t cluster::intern_zone(const std::string& name) {
  auto [it, fresh] = zone_ids_.emplace(name, static_cast<std::uint32_t>(zones_.size()));
  if (fresh) {
    zones_.push_back(zone_rec{name, {}, {}, {}});
    members_.emplace_back();
  }
  return it->second;
}

std::optional<std::uint32_t> cluster::find_zone(const std::string& name) const {
  auto it = zone_ids_.find(name);
  if (it == zone_ids_.end()) return std::nullopt;
  return it->second;
}

std::optional<std::uint32_t> cluster::index_of(node_id id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

result<std::uint32_t> cluster::add_node(const node_spec& n) {
  std::uint32_t z = intern_zone(n.zone);
  std::uint32_t idx;
  if (auto known = index_of(n.id)) {
    idx = *known;
    if (nodes_[idx].alive)
      return make_error(errc::already_exists, "node " + std::to_string(n.id) + " is already present");
    if (nodes_[idx].zone != z) members_[nodes_[idx].zone].erase(
        std::find(members_[nodes_[idx].zone].begin(), members_[nodes_[idx].zone].end(), idx));
    if (nodes_[idx].zone != z) members_[z].push_back(idx);
  } else {
    idx = static_cast<std::uint32_t>(nodes_.size());
    nodes_.emplace_back();
    index_.emplace(n.id, idx);
    members_[z].push_back(idx);
  }
  node_rec& r = nodes_[idx];
  r.id = n.id;
  r.zone = z;
  r.capacity = n.capacity;
  r.free = n.capacity;
  r.alive = true;
  r.cordoned = false;
  r.jobs.clear();
  zones_[z].capacity = zones_[z].capacity + n.capacity;
  zones_[z].free = zones_[z].free + n.capacity;
  capacity_ = capacity_ + n.capacity;
  free_ = free_ + n.capacity;
  bucket_insert(idx);
  return idx;
}

status cluster::remove_node(std::uint32_t idx) {
  node_rec& r = nodes_[idx];
  if (!r.alive) return make_error(errc::not_found, "node " + std::to_string(r.id) + " is not present");
  if (!r.jobs.empty() || !(r.free == r.capacity))
    return make_error(errc::internal, "node " + std::to_string(r.id) + " still holds members");
  bucket_erase(idx);
  zones_[r.zone].capacity = zones_[r.zone].capacity - r.capacity;
  zones_[r.zone].free = zones_[r.zone].free - r.free;
  capacity_ = capacity_ - r.capacity;
  free_ = free_ - r.free;
  r.alive = false;
  r.cordoned = false;
  r.free = {};
  return ok_status();
}

void cluster::set_cordoned(std::uint32_t idx, bool on) {
  node_rec& r = nodes_[idx];
  if (!r.alive || r.cordoned == on) return;
  if (on) {
    bucket_erase(idx);
    r.cordoned = true;
  } else {
    r.cordoned = false;
    bucket_insert(idx);
  }
}

void cluster::take(std::uint32_t idx, const resources& r) {
  node_rec& n = nodes_[idx];
  bucket_erase(idx);
  n.free = n.free - r;
  zones_[n.zone].free = zones_[n.zone].free - r;
  free_ = free_ - r;
  bucket_insert(idx);
}

void cluster::give(std::uint32_t idx, const resources& r) {
  node_rec& n = nodes_[idx];
  bucket_erase(idx);
  n.free = n.free + r;
  zones_[n.zone].free = zones_[n.zone].free + r;
  free_ = free_ + r;
  bucket_insert(idx);
}

std::uint32_t cluster::gpu_bound(std::uint32_t z, const resources& per) const {
  const auto& b = zones_[z].buckets;
  std::uint64_t total = 0;
  for (std::size_t f = per.gpus; f < b.size(); ++f) {
    if (b[f].empty()) continue;
    if (per.gpus == 0) return std::numeric_limits<std::uint32_t>::max();
    total += b[f].size() * (f / per.gpus);
  }
  return static_cast<std::uint32_t>(std::min<std::uint64_t>(total, std::numeric_limits<std::uint32_t>::max()));
}

void cluster::bucket_insert(std::uint32_t idx) {
  node_rec& n = nodes_[idx];
  if (n.cordoned) return;
  auto& b = zones_[n.zone].buckets;
  if (b.size() <= n.free.gpus) b.resize(n.free.gpus + 1);
  n.pos = static_cast<std::uint32_t>(b[n.free.gpus].size());
  b[n.free.gpus].push_back(idx);
}

void cluster::bucket_erase(std::uint32_t idx) {
  node_rec& n = nodes_[idx];
  if (n.cordoned) return;
  auto& v = zones_[n.zone].buckets[n.free.gpus];
  std::uint32_t last = v.back();
  v[n.pos] = last;
  nodes_[last].pos = n.pos;
  v.pop_back();
}

}  // namespace loom::scheduler::policy
